#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd {

namespace fs = std::filesystem;

std::size_t TensorView::numel() const {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    return n;
}

std::string TensorView::shape_str() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

MappedFile::MappedFile(const fs::path& path) {
    int fd = open_regular_file(path);
    struct stat st {};
    ::fstat(fd, &st);
    size_ = std::size_t(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            fail("cannot map {} into memory: {}", path.string(), std::strerror(errno));
        }
        ::madvise(p, size_, MADV_WILLNEED);
        data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

static std::size_t dtype_size(const std::string& dtype) {
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2")
        return 1;
    return 0;
}

namespace {

// The safetensors format caps its header at 100 MB; real ones are < 1 MB.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// A dimension past 2^40 elements is corrupt, whatever the model; model
// tensors have at most 4 dimensions, so 16 leaves room and bounds messages.
constexpr long long kMaxDim = 1LL << 40;
constexpr std::size_t kMaxRank = 16;

// shape as integers, and their product, refused if it overflows 64 bits.
std::vector<std::int64_t> read_shape(const JsonObject& info, std::size_t& numel) {
    std::vector<std::int64_t> shape;
    numel = 1;
    const Json& dims = info.array("shape");
    if (dims.size() > kMaxRank) fail("{} has {} dimensions, more than {}", info.where("shape"), dims.size(), kMaxRank);
    for (const Json& d : dims) {
        shape.push_back(json_integer(d, info.where("shape"), 0, kMaxDim));
        if (__builtin_mul_overflow(numel, std::size_t(shape.back()), &numel))
            fail("{} has more elements than 64 bits can count", info.where("shape"));
    }
    return shape;
}

// One header entry: dtype, shape and data_offsets checked against the data
// section of `data_size` bytes that starts at `base`.
TensorView read_entry(const JsonObject& info, const std::string& name, const std::byte* base,
                      std::size_t data_size) {
    TensorView t;
    t.name = name;
    t.file = info.origin();
    t.dtype = info.string("dtype");
    if (t.dtype.size() > 16) fail("{} is not a safetensors dtype (F32, BF16, ...)", info.where("dtype"));
    std::size_t numel = 0;
    t.shape = read_shape(info, numel);
    const Json& off = info.array("data_offsets");
    if (off.size() != 2) fail("{} must be [begin, end]", info.where("data_offsets"));
    auto begin = std::size_t(json_integer(off[0], info.where("data_offsets"), 0, INT64_MAX));
    auto end = std::size_t(json_integer(off[1], info.where("data_offsets"), 0, INT64_MAX));
    if (begin > end) fail("{}: tensor {} has malformed data_offsets", t.file, clipped_quote(name));
    if (end > data_size)
        fail("{} is truncated: tensor {} ends at byte {} past the end of the data ({} bytes); "
             "re-download or re-export the checkpoint", t.file, clipped_quote(name), end, data_size);
    t.data = base + begin;
    t.nbytes = end - begin;
    std::size_t esize = dtype_size(t.dtype);
    std::size_t want = 0;
    if (esize != 0 && (__builtin_mul_overflow(numel, esize, &want) || want != t.nbytes))
        fail("{}: tensor {} of shape {} and dtype {} should take {} bytes but its offsets span {}", t.file,
             clipped_quote(name), t.shape_str(), t.dtype, numel * esize, t.nbytes);
    return t;
}

// The format stores each tensor once, back to back from the first data byte
// to the last: sorted by begin, each range must start where the one before
// ended, and the last must end at `data_size`. An overlap would let two
// tensors alias one weight; a hole hides bytes no tensor accounts for.
void check_ranges_tile(const std::map<std::string, TensorView>& tensors, const std::byte* base,
                       std::size_t data_size, const std::string& where) {
    std::vector<const TensorView*> order;
    for (const auto& [name, t] : tensors) order.push_back(&t);
    auto begin_of = [&](const TensorView* t) { return std::size_t(t->data - base); };
    std::sort(order.begin(), order.end(), [&](const TensorView* a, const TensorView* b) {
        return std::pair(begin_of(a), a->nbytes) < std::pair(begin_of(b), b->nbytes);
    });
    const TensorView* previous = nullptr;
    std::size_t covered = 0;  // bytes [0, covered) belong to the tensors seen so far
    for (const TensorView* t : order) {
        std::size_t begin = begin_of(t);
        if (begin < covered)
            fail("{}: tensors {} and {} overlap (data_offsets [{}, {}] and [{}, {}]); each tensor must "
                 "have bytes of its own: re-export the checkpoint", where, clipped_quote(previous->name),
                 clipped_quote(t->name), begin_of(previous), begin_of(previous) + previous->nbytes, begin,
                 begin + t->nbytes);
        if (begin > covered)
            fail("{}: bytes [{}, {}) of the data belong to no tensor (a hole {}tensor {}); the tensors "
                 "must fill the data back to back: re-export the checkpoint", where, covered, begin,
                 previous ? fmt::format("between tensor {} and ", clipped_quote(previous->name)) : "before ",
                 clipped_quote(t->name));
        covered = begin + t->nbytes;
        previous = t;
    }
    if (covered != data_size)
        fail("{}: the last {} bytes of the data belong to no tensor ({}); the tensors must fill the data "
             "exactly: re-export the checkpoint", where, data_size - covered,
             previous ? "after tensor " + clipped_quote(previous->name) : std::string("the header lists none"));
}

}  // namespace

std::map<std::string, TensorView> read_safetensors(const std::byte* bytes, std::size_t size,
                                                   const std::string& where) {
    if (size < 8) fail("{} is truncated: {} bytes, shorter than the 8-byte header length", where, size);
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes, 8);  // little-endian, as is every x86 machine
    if (header_len > size - 8)
        fail("{} is truncated or corrupt: its header claims {} bytes but the file has only {} "
             "after the length field", where, header_len, size - 8);
    if (header_len > kMaxHeaderBytes)
        fail("{}: the safetensors header claims {} bytes, more than the format's limit of {}", where,
             header_len, kMaxHeaderBytes);
    const char* text = reinterpret_cast<const char*>(bytes) + 8;
    Json header = parse_json(std::string_view(text, header_len), where + " (safetensors header)");
    JsonObject entries(header, where, "the safetensors header");  // refuses an array, a string ...
    const std::byte* base = bytes + 8 + header_len;
    std::map<std::string, TensorView> tensors;
    for (auto& [name, info] : entries.json().items()) {
        if (name == "__metadata__") continue;
        tensors[name] = read_entry(JsonObject(info, where, "tensor " + clipped_quote(name)), name, base,
                                   size - 8 - header_len);
    }
    check_ranges_tile(tensors, base, size - 8 - header_len, where);
    return tensors;
}

void Checkpoint::add_file(const fs::path& path) {
    auto file = std::make_shared<MappedFile>(path);
    for (auto& [name, t] : read_safetensors(file->data(), file->size(), path.string())) tensors_[name] = t;
    files_.push_back(std::move(file));
}

namespace {

// `name` from the index as a path inside `folder`: relative, no "..", and not
// leading out through a symlink; a UserError otherwise.
fs::path shard_path(const fs::path& folder, const std::string& name, const std::string& index) {
    fs::path rel(name);
    bool climbs = std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
    if (name.empty() || rel.is_absolute() || climbs)
        fail("{} names shard {}, which is not a file name inside the model folder", index, clipped_quote(name));
    std::error_code ec;
    fs::path root = fs::weakly_canonical(folder, ec);
    fs::path resolved = fs::weakly_canonical(folder / rel, ec);
    if (ec) fail("{}: cannot resolve shard {}: {}", index, clipped_quote(name), ec.message());
    fs::path inside = resolved.lexically_relative(root);
    if (inside.empty() || *inside.begin() == "..")
        fail("{} names shard {}, which leads outside the model folder (through a symlink)", index,
             clipped_quote(name));
    return resolved;
}

// The shard file names of model.safetensors.index.json, each once, in order.
std::set<std::string> shard_names(const fs::path& index) {
    std::string origin = index.string();
    Json j = parse_json(read_regular_file(index, kMaxJsonFileBytes), origin);
    JsonObject weight_map = JsonObject(j, origin).object("weight_map");
    std::set<std::string> names;
    for (auto& [tensor, file] : weight_map.json().items())
        names.insert(json_string(file, weight_map.where(clipped_quote(tensor))));
    return names;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& folder) {
    Checkpoint ck;
    fs::path single = folder / "model.safetensors";
    fs::path index = folder / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(single, ec)) {
        ck.add_file(single);
    } else if (fs::exists(index, ec)) {
        for (const std::string& name : shard_names(index)) {
            fs::path file = shard_path(folder, name, index.string());
            if (!fs::exists(file, ec))
                fail("{} names shard {} which is missing from {}", index.string(), clipped_quote(name),
                     folder.string());
            ck.add_file(file);
        }
    } else {
        fail("{} has no model.safetensors (nor model.safetensors.index.json for a sharded "
             "checkpoint); PyTorch .bin checkpoints are not read, convert them to safetensors",
             folder.string());
    }
    return ck;
}

const TensorView* Checkpoint::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

std::size_t Checkpoint::file_bytes() const {
    std::size_t n = 0;
    for (auto& f : files_) n += f->size();
    return n;
}

// Tensor data need not be aligned (the header length is arbitrary), so every
// element is read with memcpy, which compiles to an unaligned load.
template <typename T>
static T load_at(const std::byte* base, std::size_t i) {
    T v;
    std::memcpy(&v, base + i * sizeof(T), sizeof(T));
    return v;
}

void convert_to_f32(const TensorView& t, float* out) {
    const std::size_t n = t.numel();
    const std::byte* in = t.data;
    if (t.dtype == "F32") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = load_at<float>(in, i);
    } else if (t.dtype == "BF16") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = bf16_to_f32(load_at<bf16>(in, i));
    } else if (t.dtype == "F16") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = f16_to_f32(load_at<std::uint16_t>(in, i));
    } else {
        fail("{}: tensor {} has dtype {}; the kit reads F32, F16 and BF16 checkpoints only",
             t.file, t.name, t.dtype);
    }
}

}  // namespace pd

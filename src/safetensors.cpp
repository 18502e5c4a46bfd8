#include "safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

namespace pd {

namespace fs = std::filesystem;
using nlohmann::json;

std::size_t TensorView::numel() const {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    return n;
}

std::string TensorView::shape_str() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

MappedFile::MappedFile(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        fail("cannot stat {}", path.string());
    }
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

void Checkpoint::add_file(const fs::path& path) {
    std::string where = path.string();
    auto file = std::make_shared<MappedFile>(path);
    if (file->size() < 8)
        fail("{} is truncated: {} bytes, shorter than the 8-byte header length", where, file->size());
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, file->data(), 8);  // little-endian, as is every x86 machine
    if (header_len > file->size() - 8)
        fail("{} is truncated or corrupt: its header claims {} bytes but the file has only {} "
             "after the length field", where, header_len, file->size() - 8);
    json header;
    try {
        header = json::parse(reinterpret_cast<const char*>(file->data()) + 8,
                             reinterpret_cast<const char*>(file->data()) + 8 + header_len);
    } catch (const json::exception& e) {
        fail("{}: the safetensors header is not valid JSON ({})", where, e.what());
    }
    if (!header.is_object()) fail("{}: the safetensors header is not a JSON object", where);
    const std::byte* base = file->data() + 8 + header_len;
    std::size_t data_size = file->size() - 8 - header_len;
    for (auto& [name, info] : header.items()) {
        if (name == "__metadata__") continue;
        try {
            TensorView t;
            t.name = name;
            t.file = where;
            t.dtype = info.at("dtype").get<std::string>();
            t.shape = info.at("shape").get<std::vector<std::int64_t>>();
            auto off = info.at("data_offsets").get<std::vector<std::uint64_t>>();
            if (off.size() != 2 || off[0] > off[1])
                fail("{}: tensor {} has malformed data_offsets", where, name);
            if (off[1] > data_size)
                fail("{} is truncated: tensor {} ends at byte {} past the end of the data "
                     "({} bytes); re-download or re-export the checkpoint", where, name, off[1],
                     data_size);
            t.data = base + off[0];
            t.nbytes = off[1] - off[0];
            std::size_t esize = dtype_size(t.dtype);
            if (esize != 0 && t.numel() * esize != t.nbytes)
                fail("{}: tensor {} of shape {} and dtype {} should take {} bytes but its offsets "
                     "span {}", where, name, t.shape_str(), t.dtype, t.numel() * esize, t.nbytes);
            tensors_[name] = std::move(t);
        } catch (const json::exception& e) {
            fail("{}: tensor {} has a malformed header entry ({})", where, name, e.what());
        }
    }
    files_.push_back(std::move(file));
}

Checkpoint Checkpoint::open(const fs::path& folder) {
    Checkpoint ck;
    fs::path single = folder / "model.safetensors";
    fs::path index = folder / "model.safetensors.index.json";
    if (fs::exists(single)) {
        ck.add_file(single);
    } else if (fs::exists(index)) {
        std::ifstream in(index);
        json j;
        try {
            in >> j;
        } catch (const json::exception& e) {
            fail("{} is not valid JSON: {}", index.string(), e.what());
        }
        if (!j.contains("weight_map") || !j["weight_map"].is_object())
            fail("{} has no \"weight_map\" object", index.string());
        std::map<std::string, bool> shards;
        for (auto& [name, file] : j["weight_map"].items()) shards[file.get<std::string>()] = true;
        for (auto& [file, _] : shards) {
            if (!fs::exists(folder / file))
                fail("{} names shard {} which is missing from {}", index.string(), file,
                     folder.string());
            ck.add_file(folder / file);
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

template <typename Out, typename Convert>
static void convert_each(const TensorView& t, Out* out, Convert convert) {
    const std::size_t n = t.numel();
    const std::byte* in = t.data;
    if (t.dtype == "F32") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = convert(load_at<float>(in, i));
    } else if (t.dtype == "BF16") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = convert(bf16_to_f32(load_at<bf16>(in, i)));
    } else if (t.dtype == "F16") {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) out[i] = convert(f16_to_f32(load_at<std::uint16_t>(in, i)));
    } else {
        fail("{}: tensor {} has dtype {}; the kit reads F32, F16 and BF16 checkpoints only",
             t.file, t.name, t.dtype);
    }
}

void convert_to_f32(const TensorView& t, float* out) {
    convert_each(t, out, [](float x) { return x; });
}

void convert_to_bf16(const TensorView& t, bf16* out) {
    if (t.dtype == "BF16") {  // already the right bits
        std::memcpy(out, t.data, t.nbytes);
        return;
    }
    convert_each(t, out, [](float x) { return f32_to_bf16(x); });
}

}  // namespace pd

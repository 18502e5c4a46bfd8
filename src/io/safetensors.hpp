// Reading Hugging Face checkpoints: safetensors files mapped into memory.
//
// A .safetensors file is: 8 bytes little-endian header length N, N bytes of
// JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...}, then
// the raw tensors. Offsets count from the first byte after the header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

namespace pd {

struct TensorView {
    std::string name;
    std::string dtype;             // "F32", "F16", "BF16" are readable; others are refused on use
    std::vector<std::int64_t> shape;
    const std::byte* data = nullptr;
    std::size_t nbytes = 0;
    std::string file;              // where it came from, for error messages

    std::size_t numel() const;
    std::string shape_str() const;  // "[768, 2304]"
};

// One memory-mapped file; the views point into the mapping.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    const std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Every tensor of a checkpoint folder: model.safetensors, or the shards listed
// in model.safetensors.index.json.
class Checkpoint {
public:
    static Checkpoint open(const std::filesystem::path& folder);
    const TensorView* find(const std::string& name) const;
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    std::size_t file_bytes() const;

private:
    void add_file(const std::filesystem::path& path);
    std::vector<std::shared_ptr<MappedFile>> files_;
    std::map<std::string, TensorView> tensors_;
};

// The tensors of one safetensors file held in memory (`size` bytes at
// `bytes`), their views pointing into it; a UserError naming `where` for a
// truncated file, a bad header, wrong types, offsets and shapes that
// disagree, or byte ranges that do not tile the data exactly (overlaps, holes).
std::map<std::string, TensorView> read_safetensors(const std::byte* bytes, std::size_t size,
                                                   const std::string& where);

// Converts a tensor to f32 (in parallel); fails on other dtypes.
void convert_to_f32(const TensorView& t, float* out);

}  // namespace pd

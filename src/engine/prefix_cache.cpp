#include "engine/prefix_cache.hpp"

#include <algorithm>

namespace pd {

PrefixCache::PrefixCache(BlockPool& blocks, int block_size)
    : blocks_(blocks), block_size_(block_size), key_(blocks.total()), parent_(blocks.total()),
      tokens_(std::size_t(blocks.total()) * block_size), next_in_bucket_(blocks.total(), -1) {
    std::size_t buckets = 1;
    while (buckets < std::size_t(blocks.total())) buckets *= 2;
    bucket_head_.assign(buckets, -1);
    blocks_.on_evict = [this](int b) { forget(b); };
}

// splitmix64's finaliser: every input bit reaches every output bit.
static std::uint64_t mix(std::uint64_t h) {
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27, h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

std::uint64_t PrefixCache::chain(std::uint64_t parent, std::span<const int> tokens) {
    std::uint64_t h = mix(parent);
    for (int t : tokens) h = mix(h ^ std::uint32_t(t));
    return h;
}

int PrefixCache::find(std::uint64_t key, std::uint64_t parent, std::span<const int> tokens) const {
    for (int b = bucket_head_[bucket_of(key)]; b >= 0; b = next_in_bucket_[b]) {
        const int* ids = tokens_.data() + std::size_t(b) * block_size_;
        if (key_[b] == key && parent_[b] == parent && std::equal(tokens.begin(), tokens.end(), ids)) return b;
    }
    return -1;
}

int PrefixCache::match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
                       std::vector<std::uint64_t>& keys_out) {
    std::uint64_t parent = kRoot;
    int n = 0;
    for (; n < max_blocks && std::size_t(n + 1) * block_size_ <= tokens.size(); n++) {
        const auto ids = tokens.subspan(std::size_t(n) * block_size_, block_size_);
        const std::uint64_t key = chain(parent, ids);
        const int b = find(key, parent, ids);
        if (b < 0) break;
        blocks_.retain(b);  // a parked block leaves the LRU list: it is in use again
        blocks_out.push_back(b);
        keys_out.push_back(key);
        parent = key;
    }
    return n;
}

std::uint64_t PrefixCache::insert(std::uint64_t parent, std::span<const int> tokens, int block) {
    const std::uint64_t key = chain(parent, tokens);
    if (blocks_.is_cached(block) || find(key, parent, tokens) >= 0) return key;
    key_[block] = key, parent_[block] = parent;
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + std::size_t(block) * block_size_);
    next_in_bucket_[block] = bucket_head_[bucket_of(key)];
    bucket_head_[bucket_of(key)] = block;
    blocks_.set_cached(block);
    cached_++;
    return key;
}

void PrefixCache::forget(int block) {
    int* link = &bucket_head_[bucket_of(key_[block])];
    while (*link != block) link = &next_in_bucket_[*link];
    *link = next_in_bucket_[block];
    next_in_bucket_[block] = -1;
    cached_--;
}

}  // namespace pd

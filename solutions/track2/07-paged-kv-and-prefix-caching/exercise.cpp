// Lab 07 reference solution: a block allocator over a free stack and an LRU
// list of parked blocks, and a prefix cache over a hash map of chained keys.
#include "exercise.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace pd::lab07 {

int StudentBlockAllocator::allocate() {
    int b = -1;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else if (!parked_.empty()) {  // evict the least recently parked
        b = parked_.front();
        parked_.pop_front();
        if (on_evict) on_evict(b);
        cached_[std::size_t(b)] = 0;
    } else {
        return -1;
    }
    refcount_[std::size_t(b)] = 1;
    return b;
}

void StudentBlockAllocator::retain(int b) {
    int& n = refcount_[std::size_t(b)];
    if (n == 0 && !cached_[std::size_t(b)])
        throw std::logic_error("block " + std::to_string(b) + " retained while free");
    if (n == 0) parked_.erase(parked_at_[std::size_t(b)]);  // in use again
    n++;
}

void StudentBlockAllocator::release(int b) {
    int& n = refcount_[std::size_t(b)];
    if (n <= 0) throw std::logic_error("block " + std::to_string(b) + " released but nobody holds it (double free)");
    if (--n > 0) return;
    if (cached_[std::size_t(b)])
        parked_at_[std::size_t(b)] = parked_.insert(parked_.end(), b);
    else
        free_.push_back(b);
}

void StudentBlockAllocator::set_cached(int b) {
    if (refcount_[std::size_t(b)] <= 0)
        throw std::logic_error("block " + std::to_string(b) + " cached while nobody holds it");
    cached_[std::size_t(b)] = 1;
}

// FNV-1a over the parent key's and the ids' bytes, then a final avalanche
// (murmur3's fmix64), so that near keys land in different map buckets.
std::uint64_t StudentPrefixCache::chain(std::uint64_t parent, std::span<const int> tokens) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    auto fold = [&h](std::uint64_t word, int bytes) {
        for (int i = 0; i < bytes; i++, word >>= 8) h = (h ^ (word & 0xff)) * 0x100000001b3ull;
    };
    fold(parent, 8);
    for (int t : tokens) fold(std::uint32_t(t), 4);
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

int StudentPrefixCache::match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
                              std::vector<std::uint64_t>& keys_out) {
    const std::size_t bs = std::size_t(block_size_);
    std::uint64_t parent = kRoot;
    int n = 0;
    for (; n < max_blocks && (std::size_t(n) + 1) * bs <= tokens.size(); n++) {
        const auto ids = tokens.subspan(std::size_t(n) * bs, bs);
        const std::uint64_t key = chain(parent, ids);
        const auto it = block_of_key_.find(key);
        if (it == block_of_key_.end()) break;
        const std::size_t b = std::size_t(it->second);
        // Equal keys with another parent or other ids: a collision, not a hit.
        if (parent_[b] != parent || !std::equal(ids.begin(), ids.end(), tokens_.begin() + std::ptrdiff_t(b * bs)))
            break;
        blocks_.retain(it->second);
        blocks_out.push_back(it->second);
        keys_out.push_back(key);
        parent = key;
    }
    return n;
}

std::uint64_t StudentPrefixCache::insert(std::uint64_t parent, std::span<const int> tokens, int block) {
    const std::uint64_t key = chain(parent, tokens);
    if (blocks_.is_cached(block) || block_of_key_.count(key)) return key;
    const std::size_t b = std::size_t(block);
    key_[b] = key, parent_[b] = parent;
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + std::ptrdiff_t(b * std::size_t(block_size_)));
    block_of_key_.emplace(key, block);
    blocks_.set_cached(block);
    return key;
}

void StudentPrefixCache::forget(int block) { block_of_key_.erase(key_[std::size_t(block)]); }

}  // namespace pd::lab07

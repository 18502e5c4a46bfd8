// For the lab tests that watch what an exercise asks of a real engine: an Engine
// that forwards every call to the one it wraps. A test derives from it and
// overrides only the calls it counts or fakes, calling ForwardingEngine's to pass
// them on.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "engine/engine.hpp"

namespace pd::lab {

class ForwardingEngine : public Engine {
public:
    explicit ForwardingEngine(std::unique_ptr<Engine> e) : e_(std::move(e)) {}

    const Config& config() const override { return e_->config(); }
    Device device() const override { return e_->device(); }
    std::string hardware() const override { return e_->hardware(); }
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        return e_->prefill(slot, tokens, keep);
    }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        return e_->decode(slots, tokens);
    }
    int cache_len(int slot) const override { return e_->cache_len(slot); }
    int batch() const override { return e_->batch(); }
    int max_seq() const override { return e_->max_seq(); }
    void reset(int slot) override { e_->reset(slot); }
    void truncate(int slot, int len) override { e_->truncate(slot, len); }
    double time_ms(const std::function<void()>& work) override { return e_->time_ms(work); }
    std::string timing_method() const override { return e_->timing_method(); }
    const Model& host_model() const override { return e_->host_model(); }

private:
    std::unique_ptr<Engine> e_;
};

}  // namespace pd::lab

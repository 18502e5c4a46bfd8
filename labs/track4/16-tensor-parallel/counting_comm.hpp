// A Comm in front of another that counts the point-to-point messages going
// through it: what the tests and the program's ring check hold YOUR
// ring_allreduce to (its messages, their bytes, and that each goes to a ring
// neighbour). Its allreduce_sum refuses: a ring must not call the collective
// it is building.
#pragma once

#include <stdexcept>

#include "comm.hpp"

namespace pd::lab16 {

class CountingComm : public Comm {
public:
    explicit CountingComm(Comm& inner) : inner_(inner) {}
    int rank() const override { return inner_.rank(); }
    int size() const override { return inner_.size(); }
    void send_recv(std::span<const float> out, int to, std::span<float> in, int from) override {
        messages++;
        sent_bytes += double(out.size_bytes());
        if (!neighbour(to) || !neighbour(from)) off_ring++;
        inner_.send_recv(out, to, in, from);
    }
    void allreduce_sum(std::span<float>) override {
        throw std::logic_error(kRingCallsAllreduce);
    }
    int broadcast(int value) override { return inner_.broadcast(value); }

    long messages = 0;    // send_recv calls on this rank
    long off_ring = 0;    // of them, to or from a rank that is not next to this one in the ring
    double sent_bytes = 0;

private:
    // r + 1 or r - 1, mod R (either direction round the ring).
    bool neighbour(int other) const {
        const int R = size(), r = rank();
        return other == (r + 1) % R || other == (r + R - 1) % R;
    }
    Comm& inner_;
};

}  // namespace pd::lab16

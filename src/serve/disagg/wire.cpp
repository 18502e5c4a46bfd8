#include "serve/disagg/wire.hpp"

#include <chrono>
#include <climits>
#include <thread>

#include <fmt/format.h>

#include "common.hpp"

namespace pd::serve::disagg {

std::string Layout::role(int rank) const {
    if (rank == 0) return "router";
    if (is_prefill(rank)) return fmt::format("prefill worker {}", rank - 1);
    if (is_decode(rank)) return fmt::format("decode worker {}", rank - 1 - prefill);
    return fmt::format("rank {} (no role)", rank);
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void idle_pause() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

int probe(int source, int tag) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
    return flag ? st.MPI_SOURCE : -1;
}

// The whole of a message already probed: its length, then the receive.
template <class T>
static std::vector<T> receive(int source, int tag, MPI_Datatype type) {
    MPI_Status st;
    MPI_Probe(source, tag, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, type, &n);
    std::vector<T> v(std::size_t(n > 0 ? n : 0));
    MPI_Recv(v.data(), n, type, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return v;
}

std::vector<int> receive_ints(int source, int tag) { return receive<int>(source, tag, MPI_INT); }
std::vector<double> receive_doubles(int source, int tag) { return receive<double>(source, tag, MPI_DOUBLE); }

int checked_count(std::size_t n, const char* what) {
    if (n > std::size_t(INT_MAX))
        fail("{} of {} elements is more than one MPI message carries ({}): use a smaller model or "
             "more messages (a per-layer schedule)", what, n, INT_MAX);
    return int(n);
}

Outbox::~Outbox() {
    for (Pending& p : pending_)
        if (p.req != MPI_REQUEST_NULL) MPI_Request_free(&p.req);
}

Outbox::Pending& Outbox::post(Pending p, const void* data, std::size_t n, MPI_Datatype type, int dest, int tag) {
    pending_.push_back(std::move(p));
    Pending& q = pending_.back();
    // The vector moved into the deque keeps its heap buffer: `data` still points into it.
    MPI_Isend(data, checked_count(n, "a message"), type, dest, tag, MPI_COMM_WORLD, &q.req);
    return q;
}

void Outbox::send(std::vector<int> v, int dest, int tag) {
    const int* data = v.data();
    const std::size_t n = v.size();
    post({MPI_REQUEST_NULL, std::move(v), {}, {}}, data, n, MPI_INT, dest, tag);
}

void Outbox::send(std::vector<double> v, int dest, int tag) {
    const double* data = v.data();
    const std::size_t n = v.size();
    post({MPI_REQUEST_NULL, {}, std::move(v), {}}, data, n, MPI_DOUBLE, dest, tag);
}

void Outbox::send(std::vector<float> v, int dest, int tag) {
    const float* data = v.data();
    const std::size_t n = v.size();
    post({MPI_REQUEST_NULL, {}, {}, std::move(v)}, data, n, MPI_FLOAT, dest, tag);
}

int Outbox::poll() {
    for (Pending& p : pending_) {
        int done = 0;
        if (p.req != MPI_REQUEST_NULL) MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
    }
    while (!pending_.empty() && pending_.front().req == MPI_REQUEST_NULL) pending_.pop_front();
    int left = 0;
    for (const Pending& p : pending_) left += p.req != MPI_REQUEST_NULL;
    return left;
}

bool Outbox::drain(double deadline_s) {
    while (poll() > 0) {
        if (now_s() > deadline_s) return false;
        idle_pause();
    }
    return true;
}

}  // namespace pd::serve::disagg

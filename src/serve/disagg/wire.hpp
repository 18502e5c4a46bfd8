// The messages between the ranks of a disaggregated run, and the MPI calls
// every role shares. Rank 0 is the router, ranks 1..P the prefill workers,
// ranks P+1..P+D the decode workers.
//
// Before the clock starts, every worker says it has built its engine:
//   worker  -> router   kReady       empty
// One request's path, message by message (ints unless said):
//   router  -> prefill  kRequest     [id, decode rank, max_tokens, prompt ids...]
//   prefill -> decode   kKvHeader    [id, max_tokens, n_blocks, n_messages,
//                                     (first, last) layers of each message..., prompt ids...]
//   prefill -> decode   kKvData      floats, one message per LayerRange, in schedule order
//   prefill -> decode   kFirstToken  [id, token]            (after the prefill's logits)
//   prefill -> router   kPrefillDone doubles [id, start_s, end_s, first_send_s, kv_bytes]
//   decode  -> router   kKvArrived   doubles [id, kv_ready_s]
//   decode  -> router   kToken       [id, token, 1 if it is the last]   (token 1 included)
//   router  -> workers  kStop        empty, once every request has finished
// Messages of one tag between two ranks arrive in the order sent (MPI's
// non-overtaking rule): that is what keeps a transfer's kKvData in order.
// Times are steady_clock seconds: comparable across ranks on one machine only.
#pragma once

#include <mpi.h>

#include <deque>
#include <string>
#include <vector>

namespace pd::serve::disagg {

enum Tag : int { kRequest = 1, kKvHeader, kKvData, kFirstToken, kPrefillDone, kKvArrived, kToken, kStop, kReady };

// Which rank does what, from --prefill P and --decode D.
struct Layout {
    int prefill = 1, decode = 1;
    int ranks() const { return 1 + prefill + decode; }
    int prefill_rank(int i) const { return 1 + i; }
    int decode_rank(int i) const { return 1 + prefill + i; }
    bool is_prefill(int rank) const { return rank >= 1 && rank <= prefill; }
    bool is_decode(int rank) const { return rank > prefill && rank < ranks(); }
    std::string role(int rank) const;  // "router", "prefill worker 1", "decode worker 0"
};

double now_s();  // steady_clock seconds

// A rank with nothing to do sleeps this long between polls (200 us), leaving
// the cores to the ranks that compute instead of spinning in MPI.
void idle_pause();

// A message waiting at this rank (MPI_Iprobe): its source, or -1 when none.
int probe(int source, int tag);
std::vector<int> receive_ints(int source, int tag);
std::vector<double> receive_doubles(int source, int tag);

// Non-blocking sends whose buffers live here until MPI is done with them, so
// no rank ever blocks on a busy receiver (a rendezvous send of a long message
// would wait until the other side posts its receive).
class Outbox {
public:
    Outbox() = default;
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;
    ~Outbox();
    void send(std::vector<int> v, int dest, int tag);
    void send(std::vector<double> v, int dest, int tag);
    // Takes the buffer: the floats must not change until the send completes.
    void send(std::vector<float> v, int dest, int tag);
    // Frees the buffers of completed sends (MPI_Test). Returns those still in flight.
    int poll();
    // Polls until every send completed or `deadline_s` (now_s clock) passed; false then.
    bool drain(double deadline_s);

private:
    struct Pending {
        MPI_Request req = MPI_REQUEST_NULL;
        std::vector<int> ints;
        std::vector<double> doubles;
        std::vector<float> floats;
    };
    Pending& post(Pending p, const void* data, std::size_t n, MPI_Datatype type, int dest, int tag);
    std::deque<Pending> pending_;
};

// MPI's element counts are int: a longer message is refused with a message.
int checked_count(std::size_t n, const char* what);

}  // namespace pd::serve::disagg

// Lab 04: what you write. A serving benchmark's view of latency, built from
// what the model really did: the first-come-first-served queue in front of ONE
// model (a virtual clock), then the metrics a client sees from the timestamps
// of the tokens that reach it. All times are in milliseconds on one clock.
//
// Names follow vLLM's benchmark (ttft, tpot, itl, e2el), so your numbers can be
// read next to theirs.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace pd::lab04 {

// What serving one request took on the model, measured with the engine's
// timer, counted from the moment the server picks the request up (ms).
struct ServiceTrace {
    double first_token_ms = 0;    // tokenize + prefill + first sample + streaming token 1
    std::vector<double> step_ms;  // (n - 1): each later token's decode step + sample + streaming
};

// Where one request sits on the virtual clock.
struct Scheduled {
    double arrival_ms = 0;               // when the client sent it
    double start_ms = 0;                 // when the server picked it up (>= arrival)
    double queue_ms = 0;                 // start - arrival: waiting, no work done
    std::vector<double> token_times_ms;  // (n): when token k reached the client
};

// Task 1 (README "How the queue is simulated"): ONE server, first come first
// served, one request at a time. Request i arrives at arrival_ms[i] and, once
// started, streams its tokens as services[i] says. The server takes the
// waiting request that arrived first (on equal arrival times, the lower
// index), and is free again when that request's last token is out.
//   arrival_ms : (R) in any order (a request may be listed before an earlier one)
//   services   : (R) request i's service
// Returns (R) entries in the order of the input (entry i is request i).
// Throws std::invalid_argument when the spans differ in length, an arrival is
// negative or not finite, or a service time is negative or not finite.
std::vector<Scheduled> schedule_fcfs(std::span<const double> arrival_ms,
                                     std::span<const ServiceTrace> services);

// One request, seen from the client.
struct RequestMetrics {
    int output_tokens = 0;          // tokens that reached the client (n)
    double ttft_ms = 0;             // time to first token: token_times[0] - submit
    std::optional<double> tpot_ms;  // time per output token after the first:
                                    //   (e2el - ttft) / (n - 1); no value when n == 1
    double e2el_ms = 0;             // end-to-end latency: token_times[n-1] - submit
    std::vector<double> itls_ms;    // (n - 1) inter-token latencies: token_times[k] - token_times[k-1]
};

// Task 2: the metrics of one request from its submit time and the arrival
// time of each of its output tokens (token_times_ms: (n), in order).
// Throws std::invalid_argument when token_times_ms is empty (a request that
// produced nothing has no first token), when a token arrives before the submit
// time, or when a timestamp is earlier than the one before it.
RequestMetrics request_metrics(double submit_ms, std::span<const double> token_times_ms);

// A service-level objective (SLO): the limits every request must stay within
// (a metric meets its limit when it is <= the limit). An unset limit is not
// part of the objective. vLLM's benchmark takes the same three (--goodput).
struct Slo {
    std::optional<double> ttft_ms;
    std::optional<double> tpot_ms;  // a one-token answer has no TPOT: it meets any TPOT limit
    std::optional<double> e2el_ms;
};

// How many requests met the objective, and at what rate they were served.
struct Goodput {
    int good = 0;               // requests that met every limit set
    double requests_per_s = 0;  // good / the run's span in seconds
};

// Task 3: goodput, the rate of requests served WITHIN the objective. The
// run's span is from the first arrival to the last token of any request (the
// span the program's throughput uses), so with no limit set goodput is the
// throughput, and every limit can only lower it.
//   scheduled : (R) from schedule_fcfs; metrics : (R), entry i of request i
// Throws std::invalid_argument when the spans differ in length or are empty,
// a request has no token, the span is not above 0 ms, or a limit that is set
// is negative or not finite.
Goodput goodput(std::span<const Scheduled> scheduled, std::span<const RequestMetrics> metrics, const Slo& slo);

}  // namespace pd::lab04

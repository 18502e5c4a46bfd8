#include "serve/disagg/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "serve/disagg/wire.hpp"

namespace pd::serve::disagg {

MpiSession::MpiSession(int& argc, char**& argv) {
    // Open MPI's launchers set these; a process started by hand has neither.
    launched_ = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK");
    if (!launched_) return;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
    if (launched_) MPI_Finalize();
}

void broadcast_from_router(int& code, int* words, int n_words) {
    std::vector<int> msg(std::size_t(n_words) + 1);
    msg[0] = code;
    std::copy(words, words + n_words, msg.begin() + 1);
    MPI_Request req;
    MPI_Ibcast(msg.data(), n_words + 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        idle_pause();
    }
    code = msg[0];
    std::copy(msg.begin() + 1, msg.end(), words);
}

}  // namespace pd::serve::disagg

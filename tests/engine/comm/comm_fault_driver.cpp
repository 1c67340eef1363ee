// Runs one fault scenario under mpirun for tst_comm_faults (which checks what it prints and how fast):
//   mismatch       rank 0 all-reduces 1000 elements, the others 1024
//   type-mismatch  rank 0 all-reduces fp32, the others fp16
//   silent-peer    rank 1 never calls the all-reduce (the others must time out, not hang)
//   silent-sender  rank 0 waits for a message rank 1 never sends
//   stuck-recv     the same, printing rank 0's flight record while it waits and after it timed out
//   peer-dies      rank 1 is killed (SIGKILL) between two all-reduces
//   late-message   rank 0's receive times out; rank 1's later messages must reach rank 0's next receives
//   block-mismatch ranks all-reduce with int8 codecs of different block sizes
//   shm-silent-peer rank 1 never joins the first shm all-reduce, which makes the shared-memory segment (no
//                  agreement check): rank 0 times out there and prints how many of its segments /dev/shm holds
#include "engine/comm/FlightRecorder.h"
#include "engine/comm/MpiCommunicator.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>

using namespace loom::comm;

int main(int argc, char** argv)
{
    const std::string scenario = argc > 1 ? argv[1] : "";
    if (scenario == "shm-silent-peer")
        setenv("LOOM_COMM_CHECK", "0", 1); // straight into the segment's creation, not the agreement check
    MpiSession session(&argc, &argv);
    const int rank = session.worldRank();
    bool failed = false;
    {
        MpiCommunicator world(MPI_COMM_WORLD, loom::trace::GroupKind::World, "world", nullptr);
        std::vector<float> data(1024, 1.0f);
        try {
            if (scenario == "mismatch") {
                world.allReduce(data.data(), rank == 0 ? 1000 : 1024, DType::F32, ReduceOp::Sum)->wait();
            } else if (scenario == "type-mismatch") {
                world.allReduce(data.data(), 512, rank == 0 ? DType::F32 : DType::F16, ReduceOp::Sum)->wait();
            } else if (scenario == "silent-peer") {
                if (rank == 1)
                    std::this_thread::sleep_for(std::chrono::seconds(60));
                else
                    world.allReduce(data.data(), data.size(), DType::F32, ReduceOp::Sum)->wait();
            } else if (scenario == "silent-sender") {
                if (rank == 0)
                    world.recv(data.data(), 256, DType::F32, 1)->wait();
                else
                    std::this_thread::sleep_for(std::chrono::seconds(60));
            } else if (scenario == "stuck-recv") {
                if (rank == 0) {
                    auto work = world.recv(data.data(), 256, DType::F32, 1);
                    std::printf("rank 0: waiting: %s\n", FlightRecorder::instance().text().c_str());
                    std::fflush(stdout);
                    work->wait();
                } else {
                    std::this_thread::sleep_for(std::chrono::seconds(60));
                }
            } else if (scenario == "peer-dies") {
                world.allReduce(data.data(), data.size(), DType::F32, ReduceOp::Sum)->wait();
                if (rank == 1)
                    raise(SIGKILL);
                CollectiveOptions ring;
                ring.algorithm = CollectiveAlgorithm::Ring;
                world.allReduce(data.data(), data.size(), DType::F32, ReduceOp::Sum, ring)->wait();
            } else if (scenario == "late-message") {
                if (rank == 0) {
                    try {
                        world.recv(data.data(), 1, DType::F32, 1)->wait(); // times out: rank 1 is still asleep
                    } catch (const CommError&) {
                        std::printf("rank 0: first receive timed out\n");
                    }
                    float got = 0;
                    world.recv(&got, 1, DType::F32, 1)->wait();
                    std::printf("rank 0: next receive got %g\n", double(got));
                } else if (rank == 1) {
                    std::this_thread::sleep_for(std::chrono::seconds(3));
                    const float first = 111, second = 222;
                    world.send(&first, 1, DType::F32, 0)->wait();
                    world.send(&second, 1, DType::F32, 0)->wait();
                }
            } else if (scenario == "block-mismatch") {
                CollectiveOptions o;
                o.codec = *loom::plan::Codec::parse("int8");
                o.codecBlock = rank == 0 ? 250 : 256;
                world.allReduce(data.data(), 1000, DType::F32, ReduceOp::Sum, o)->wait();
            } else if (scenario == "shm-silent-peer") {
                if (rank == 1)
                    std::this_thread::sleep_for(std::chrono::seconds(60));
                CollectiveOptions shm;
                shm.algorithm = CollectiveAlgorithm::SharedMemory;
                world.allReduce(data.data(), data.size(), DType::F32, ReduceOp::Sum, shm)->wait();
            } else {
                std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
                return 64;
            }
        } catch (const CommError& e) {
            std::printf("rank %d: CommError: %s\n", rank, e.what());
            std::fflush(stdout);
            failed = true;
        }
        if (failed && scenario == "stuck-recv") {
            std::printf("rank %d: after: %s\n", rank, FlightRecorder::instance().text().c_str());
            std::fflush(stdout);
        }
        if (failed && scenario == "shm-silent-peer") {
            const std::string mine = "loom-" + std::to_string(getpid()) + "-";
            int left = 0;
            for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
                left += entry.path().filename().string().rfind(mine, 0) == 0;
            std::printf("rank %d: segments left in /dev/shm: %d\n", rank, left);
            std::fflush(stdout);
        }
        if (failed
            && (scenario == "silent-peer" || scenario == "silent-sender" || scenario == "stuck-recv"
                || scenario == "shm-silent-peer"))
            MPI_Abort(MPI_COMM_WORLD, 3); // the peer is stuck: end the job, as the engine does
    }
    return failed ? 2 : 0;
}

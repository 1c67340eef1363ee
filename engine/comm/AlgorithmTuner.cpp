#include "engine/comm/AlgorithmTuner.h"

namespace loom::comm {

CollectiveAlgorithm CollectiveTuning::allReduceAlgorithm(std::size_t bytes, int ranks) const
{
    return plan::resolveAllreduce(algorithm, { backend, bytes, ranks, nodes });
}

CollectiveOptions CollectiveTuning::shardOptions(std::size_t bytes, int ranks) const
{
    CollectiveOptions options;
    options.chunkBytes = chunkBytes;
    options.algorithm = plan::shardAlgorithm(allReduceAlgorithm(bytes, ranks));
    return options;
}

} // namespace loom::comm

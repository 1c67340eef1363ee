#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::train {

// The training tokens: a text file read as bytes (vocabulary 256), a token file in llm.c's format (256
// int32 header words: magic 20240520, version 1, token count; then uint16 tokens), or, with neither, a
// synthetic corpus generated from the seed: sentences of made-up words with a sparse word-to-word
// transition table, so a model can learn and its loss visibly falls.
class Corpus {
public:
    // Throws std::runtime_error with a message naming the file and the problem.
    static Corpus fromFile(const std::string& path);
    static Corpus synthetic(std::uint64_t seed, std::size_t bytes = 1 << 20);

    const std::vector<std::uint16_t>& tokens() const { return m_tokens; }
    int maxToken() const { return m_maxToken; }
    std::string description() const { return m_description; }

    // The input and target tokens of global sequence `index` (0 .. globalBatch-1) of step `step`, `seq`
    // tokens each. The same for every layout: data parallelism only decides which rank reads which index.
    void sequence(std::uint64_t seed, std::int64_t step, std::int64_t index, std::int64_t seq, std::int32_t* input,
        std::int32_t* target) const;

private:
    std::vector<std::uint16_t> m_tokens;
    int m_maxToken = 0;
    std::string m_description;
};

} // namespace loom::train

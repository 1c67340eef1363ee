#include "engine/train/Corpus.h"

#include "engine/train/Mix.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace loom::train {

Corpus Corpus::fromFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot open the data file \"" + path + "\"; check the path");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Corpus c;
    std::int32_t header[256] = {};
    std::memcpy(header, bytes.data(), std::min(bytes.size(), sizeof header));
    if (header[0] == 20240520 && bytes.size() < sizeof header)
        throw std::runtime_error("\"" + path + "\" starts like an llm.c token file (magic 20240520) but has only "
            + std::to_string(bytes.size()) + " bytes, less than its 1024-byte header; the file is cut short");
    if (header[0] == 20240520) {
        if (header[2] < 0)
            throw std::runtime_error(
                "\"" + path + "\" says it holds " + std::to_string(header[2]) + " tokens; the header is damaged");
        if (header[1] != 1)
            throw std::runtime_error("\"" + path + "\" is an llm.c token file of version " + std::to_string(header[1])
                + "; Loom reads version 1");
        const auto count = static_cast<std::size_t>(header[2]);
        if (bytes.size() != sizeof header + 2 * count)
            throw std::runtime_error("\"" + path + "\" says it holds " + std::to_string(count) + " tokens but has "
                + std::to_string((bytes.size() - sizeof header) / 2) + "; the file is cut short or damaged");
        c.m_tokens.resize(count);
        std::memcpy(c.m_tokens.data(), bytes.data() + sizeof header, 2 * count);
        c.m_description = "llm.c token file " + path + " (" + std::to_string(count) + " tokens)";
    } else {
        c.m_tokens.assign(bytes.begin(), bytes.end());
        for (auto& t : c.m_tokens)
            t &= 0xff;
        c.m_description = "text file " + path + " (" + std::to_string(bytes.size()) + " bytes)";
    }
    if (c.m_tokens.size() < 2)
        throw std::runtime_error("\"" + path + "\" holds fewer than 2 tokens; a corpus needs at least seq_len + 1");
    c.m_maxToken = *std::max_element(c.m_tokens.begin(), c.m_tokens.end());
    return c;
}

Corpus Corpus::synthetic(std::uint64_t seed, std::size_t bytes)
{
    std::mt19937_64 rng(seed ^ 0x5EEDC0DEull);
    const int words = 48;
    std::vector<std::string> vocabulary;
    for (int w = 0; w < words; ++w) {
        std::string word;
        const int length = 2 + static_cast<int>(rng() % 6);
        for (int i = 0; i < length; ++i)
            word += static_cast<char>('a' + rng() % 26);
        vocabulary.push_back(word);
    }
    // Each word is followed by one of 3 others; sentences end after 4-11 words.
    std::vector<std::array<int, 3>> next(words);
    for (auto& n : next)
        for (auto& w : n)
            w = static_cast<int>(rng() % words);
    Corpus c;
    int word = 0, inSentence = 0, sentenceLength = 6;
    while (c.m_tokens.size() < bytes) {
        for (char ch : vocabulary[static_cast<std::size_t>(word)])
            c.m_tokens.push_back(static_cast<std::uint8_t>(ch));
        if (++inSentence >= sentenceLength) {
            c.m_tokens.push_back('.');
            c.m_tokens.push_back('\n');
            inSentence = 0;
            sentenceLength = 4 + static_cast<int>(rng() % 8);
            word = static_cast<int>(rng() % words);
        } else {
            c.m_tokens.push_back(' ');
            word = next[static_cast<std::size_t>(word)][rng() % 3];
        }
    }
    c.m_maxToken = 255;
    c.m_description
        = "synthetic corpus (seed " + std::to_string(seed) + ", " + std::to_string(c.m_tokens.size()) + " bytes)";
    return c;
}

void Corpus::sequence(std::uint64_t seed, std::int64_t step, std::int64_t index, std::int64_t seq, std::int32_t* input,
    std::int32_t* target) const
{
    const std::size_t span = m_tokens.size() - static_cast<std::size_t>(seq) - 1;
    const std::size_t start = span == 0
        ? 0
        : static_cast<std::size_t>(
            mix64(seed ^ mix64(static_cast<std::uint64_t>(step) * 1000003ull + static_cast<std::uint64_t>(index)))
            % (span + 1));
    for (std::int64_t i = 0; i < seq; ++i) {
        input[i] = m_tokens[start + static_cast<std::size_t>(i)];
        target[i] = m_tokens[start + static_cast<std::size_t>(i) + 1];
    }
}

} // namespace loom::train

#pragma once

#include "engine/plan/TextUtil.h"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::plan {

// One enumerated choice of the layout file: its value and the word the file writes for it. Each enum has one
// table of these (next to the enum), in the order the workbench offers the values; the reader, the writer,
// the panels, the lessons and the messages all take their words from it, so a value added to the enum and
// its table reaches every one of them.
template <typename E> struct Word {
    E value;
    std::string_view word;
};

template <typename E, std::size_t N> using WordTable = std::array<Word<E>, N>;

// The table's word for `value`; the first entry's word when the value is missing (a table bug the
// round-trip test catches).
template <typename E, std::size_t N> constexpr std::string_view wordOf(const WordTable<E, N>& table, E value)
{
    for (const Word<E>& w : table)
        if (w.value == value)
            return w.word;
    return table[0].word;
}

template <typename E, std::size_t N>
constexpr std::optional<E> valueOf(const WordTable<E, N>& table, std::string_view word)
{
    for (const Word<E>& w : table)
        if (w.word == word)
            return w.value;
    return std::nullopt;
}

template <typename E, std::size_t N> constexpr std::array<E, N> valuesOf(const WordTable<E, N>& table)
{
    std::array<E, N> values {};
    for (std::size_t i = 0; i < N; ++i)
        values[i] = table[i].value;
    return values;
}

template <typename E, std::size_t N> std::vector<std::string> wordsOf(const WordTable<E, N>& table)
{
    std::vector<std::string> words;
    words.reserve(N);
    for (const Word<E>& w : table)
        words.emplace_back(w.word);
    return words;
}

// "gpipe, 1f1b or interleaved": the words as a message lists them.
template <typename E, std::size_t N> std::string wordList(const WordTable<E, N>& table)
{
    return text::orList(wordsOf(table));
}

} // namespace loom::plan

#pragma once
// Small helpers shared by the Strategy panel's files (StrategyPanel*.cpp); not part of any interface.

#include "engine/plan/Choices.h"

#include <QComboBox>
#include <QSpinBox>
#include <QStringList>

#include <algorithm>
#include <array>

namespace loom::views::strategy {

enum MergeId {
    MergeVpp = 1,
    MergeMicro,
    MergeGlobal,
    MergeTopk,
    MergeBucket,
    MergeChunk,
    MergeNodes,
    MergeCp,
    MergeGroup
};

inline QSpinBox* spin(int min, int max)
{
    auto* s = new QSpinBox;
    s->setRange(min, max);
    s->setKeyboardTracking(false);
    return s;
}

inline QComboBox* combo(const QStringList& items)
{
    auto* c = new QComboBox;
    c->addItems(items);
    return c;
}

// A choice of one of the plan's enums: each item shows the layout file's word and holds the value.
template <typename Enum, std::size_t N> QComboBox* enumCombo(const std::array<Enum, N>& values)
{
    auto* c = new QComboBox;
    for (Enum v : values) {
        using plan::toString;
        c->addItem(QString::fromLatin1(toString(v).data(), qsizetype(toString(v).size())), int(v));
    }
    return c;
}

template <typename Enum> Enum chosen(const QComboBox* box, int index)
{
    return static_cast<Enum>(box->itemData(index).toInt());
}

template <typename Enum> void select(QComboBox* box, Enum value)
{
    box->setCurrentIndex(std::max(0, box->findData(int(value))));
}

} // namespace loom::views::strategy

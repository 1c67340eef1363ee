#pragma once

#include <QObject>
#include <QString>

#include <utility>
#include <vector>

namespace loom::views {

// The figures the Explain dock explains: key (the Prediction panel's figure keys and the measured ones) and
// caption. Qt Core only, so that the lessons' check feedback (loom_lessons) names a topic as the dock does.
inline const std::vector<std::pair<QString, QString>>& explainTopics()
{
    static const std::vector<std::pair<QString, QString>> t = {
        { QStringLiteral("step"), QObject::tr("Step time (predicted)") },
        { QStringLiteral("tokens"), QObject::tr("Tokens/s (predicted)") },
        { QStringLiteral("tflops"), QObject::tr("TFLOP/s per GPU (predicted)") },
        { QStringLiteral("mfu"), QObject::tr("MFU (predicted)") },
        { QStringLiteral("bubble"), QObject::tr("Pipeline bubble (predicted)") },
        { QStringLiteral("memory"), QObject::tr("Memory of the most loaded device") },
        { QStringLiteral("split.compute"), QObject::tr("Step split: compute") },
        { QStringLiteral("split.tp"), QObject::tr("Step split: exposed TP communication") },
        { QStringLiteral("split.pp"), QObject::tr("Step split: exposed PP communication") },
        { QStringLiteral("split.dp"), QObject::tr("Step split: exposed DP communication") },
        { QStringLiteral("split.bubble"), QObject::tr("Step split: bubble") },
        { QStringLiteral("split.optimizer"), QObject::tr("Step split: optimizer") },
        { QStringLiteral("memory.params"), QObject::tr("Memory: parameters") },
        { QStringLiteral("memory.grads"), QObject::tr("Memory: gradients") },
        { QStringLiteral("memory.optimizer"), QObject::tr("Memory: optimizer state") },
        { QStringLiteral("memory.activations"), QObject::tr("Memory: activations") },
        { QStringLiteral("memory.reserve"), QObject::tr("Memory: reserve") },
        { QStringLiteral("memory.gathered"), QObject::tr("Memory: gathered parameters (ZeRO-3)") },
        { QStringLiteral("memory.fp8"), QObject::tr("Memory: FP8 scaling state") },
        { QStringLiteral("memory.residual"), QObject::tr("Memory: codec residual (error feedback)") },
        { QStringLiteral("measured.bubble"), QObject::tr("Bubble per stage (measured)") },
        { QStringLiteral("measured.busbw"), QObject::tr("Bus bandwidth per collective (measured)") },
        { QStringLiteral("measured.tokens"), QObject::tr("Tokens/s (measured)") },
    };
    return t;
}

// The caption of a topic key, or the key itself when it is not one.
inline QString explainTopicCaption(const QString& key)
{
    for (const auto& [k, caption] : explainTopics())
        if (k == key)
            return caption;
    return key;
}

} // namespace loom::views

#include "views/PredictionPanel.h"
#include "views/Units.h"

#include "views/Colors.h"
#include "views/Explain.h"
#include "views/StackedBar.h"

#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QVBoxLayout>

namespace loom::views {

namespace {

struct PartStyle {
    const char* key;
    const char* caption;
    QColor color;
    // Zero unless the layout asks for it (ZeRO-3, FP8 delayed scaling, a lossy codec with error feedback): its
    // legend line shows only then, as in the Explain dock's breakdown (explain::memoryParts).
    bool optional = false;
};

const PartStyle kSplit[] = {
    { "compute", QT_TRANSLATE_NOOP("PredictionPanel", "compute"), colors::forward },
    { "tp", QT_TRANSLATE_NOOP("PredictionPanel", "TP comm."), colors::tensorComm },
    { "cp", QT_TRANSLATE_NOOP("PredictionPanel", "CP comm."), colors::contextComm },
    { "pp", QT_TRANSLATE_NOOP("PredictionPanel", "PP comm."), colors::pipelineComm },
    { "dp", QT_TRANSLATE_NOOP("PredictionPanel", "DP comm."), colors::dataComm },
    { "bubble", QT_TRANSLATE_NOOP("PredictionPanel", "bubble"), colors::idle },
    { "optimizer", QT_TRANSLATE_NOOP("PredictionPanel", "optimizer"), colors::optimizer },
};

const PartStyle kMemory[] = {
    { "params", QT_TRANSLATE_NOOP("PredictionPanel", "parameters"), QColor(0x00, 0x72, 0xB2) },
    { "grads", QT_TRANSLATE_NOOP("PredictionPanel", "gradients"), QColor(0x00, 0x9E, 0x73) },
    { "optimizer", QT_TRANSLATE_NOOP("PredictionPanel", "optimizer state"), QColor(0xF0, 0xE4, 0x42) },
    { "activations", QT_TRANSLATE_NOOP("PredictionPanel", "activations"), QColor(0xCC, 0x79, 0xA7) },
    { "reserve", QT_TRANSLATE_NOOP("PredictionPanel", "reserve"), QColor(0xBB, 0xBB, 0xBB) },
    { "gathered", QT_TRANSLATE_NOOP("PredictionPanel", "gathered (ZeRO-3)"), QColor(0x56, 0xB4, 0xE9), true },
    { "fp8", QT_TRANSLATE_NOOP("PredictionPanel", "FP8 scaling state"), QColor(0xE6, 0x9F, 0x00), true },
    { "residual", QT_TRANSLATE_NOOP("PredictionPanel", "codec residual"), QColor(0xD5, 0x5E, 0x00), true },
};
QString swatch(const QColor& c)
{
    return QStringLiteral("<span style=\"color:%1\">■</span> ").arg(c.name());
}
QString gb(double x)
{
    return gigabytesText(x); // the Explain dock's breakdown prints the same figures
}

} // namespace

PredictionPanel::PredictionPanel(QWidget* parent)
    : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(6, 6, 6, 6);
    auto* figures = new QGridLayout;
    figures->setHorizontalSpacing(12);
    figures->setVerticalSpacing(3); // seven lines, compact enough to fit under Strategy at 1280×800
    // Recommend sits beside the two short figures (step time, tokens/s) rather than on a line of its own: at
    // 1280×800 that line was what a layout's warning needed to show whole.
    addFigure(figures, 0, QStringLiteral("step"), tr("Step time"), 1);
    addFigure(figures, 1, QStringLiteral("tokens"), tr("Tokens/s"), 1);
    addFigure(figures, 2, QStringLiteral("tflops"), tr("TFLOP/s per GPU"));
    addFigure(figures, 3, QStringLiteral("mfu"), tr("MFU"));
    addFigure(figures, 4, QStringLiteral("bubble"), tr("Bubble"));
    addFigure(figures, 5, QStringLiteral("imbalance"), tr("Load imbalance"));
    addFigure(figures, 6, QStringLiteral("memory"), tr("Memory"));
    figures->setColumnStretch(1, 1);
    outer->addLayout(figures);

    auto legend = [this](QGridLayout* grid, const char* group, const PartStyle* styles, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            auto* l = new QLabel;
            l->setTextFormat(Qt::RichText);
            m_labels[QString::fromLatin1(group) + QLatin1Char('.') + QString::fromLatin1(styles[i].key)] = l;
            grid->addWidget(l, int(i), 0);
        }
        grid->setVerticalSpacing(0); // the lines of a legend, not separate fields
    };
    // The boxes' frames as narrow as stays readable: every line they save is one a warning below can wrap onto.
    auto compact = [](QVBoxLayout* box) {
        box->setContentsMargins(6, 4, 6, 4);
        box->setSpacing(3);
    };
    // Communication counts only where it is exposed (not hidden behind compute): the box's title says so once, so
    // the legend lines stay short enough for two boxes side by side.
    auto* splitBox = new QGroupBox(tr("Step split (critical stage)"));
    splitBox->setToolTip(tr("The step of the critical stage: compute, the communication it waits for (exposed, not "
                            "hidden behind compute), the bubble and the optimizer."));
    auto* splitLayout = new QVBoxLayout(splitBox);
    compact(splitLayout);
    m_split = new StackedBar;
    splitLayout->addWidget(m_split);
    auto* splitLegend = new QGridLayout;
    legend(splitLegend, "split", kSplit, std::size(kSplit));
    splitLayout->addLayout(splitLegend);

    auto* memBox = new QGroupBox(tr("Memory (most loaded device)"));
    auto* memLayout = new QVBoxLayout(memBox);
    compact(memLayout);
    m_memory = new StackedBar;
    memLayout->addWidget(m_memory);
    auto* memLegend = new QGridLayout;
    legend(memLegend, "memory", kMemory, std::size(kMemory));
    for (const PartStyle& part : kMemory)
        if (part.optional)
            label(QStringLiteral("memory.") + QString::fromLatin1(part.key))->hide();
    memLayout->addLayout(memLegend);
    // The two breakdowns side by side: stacked, the panel was 634 px tall and did not fit under Strategy at
    // 1280×800.
    auto* parts = new QHBoxLayout;
    parts->addWidget(splitBox, 1);
    parts->addWidget(memBox, 1);
    outer->addLayout(parts);

    auto* status = new QLabel;
    status->setWordWrap(true);
    status->setTextFormat(Qt::PlainText);
    m_labels[QStringLiteral("status")] = status;
    outer->addWidget(status);

    m_recommend = new QPushButton(tr("Recommend…"));
    m_recommend->setToolTip(tr("Search every valid tp, pp, dp, vpp, micro-batch, schedule, ZeRO and recompute for this "
                               "model on these nodes and rank the layouts that fit by predicted throughput."));
    connect(m_recommend, &QPushButton::clicked, this, &PredictionPanel::recommendRequested);
    figures->addWidget(m_recommend, 0, 2, 2, 1, Qt::AlignTop | Qt::AlignRight);
    outer->addStretch(1);
}

QLabel* PredictionPanel::addFigure(QGridLayout* grid, int row, const QString& key, const QString& caption, int columns)
{
    auto* name = new QLabel(caption);
    auto* value = new QLabel(QStringLiteral("–"));
    QFont f = value->font();
    f.setBold(true);
    value->setFont(f);
    value->setWordWrap(true); // "10.3 % at stage 63, the bottleneck (closed form …)" wraps, never widens the panel
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    grid->addWidget(name, row, 0);
    grid->addWidget(value, row, 1, 1, columns);
    m_labels[key] = value;
    return value;
}

QLabel* PredictionPanel::label(const QString& key) const
{
    const auto it = m_labels.find(key);
    return it == m_labels.end() ? nullptr : it->second;
}

void PredictionPanel::setAnalysis(const LayoutAnalysis& a)
{
    QLabel* status = label(QStringLiteral("status"));
    const auto errors = a.diagnostics.errors();
    if (!a.prediction) {
        for (auto& [key, l] : m_labels)
            if (l != status) {
                l->setText(key.contains(QLatin1Char('.')) ? QString() : QStringLiteral("–"));
                l->setToolTip(QString());
            }
        m_split->setParts({});
        m_memory->setParts({});
        status->setText(QString::fromStdString(a.noPrediction)
            + (errors.empty() ? QString() : QStringLiteral(":\n") + QString::fromStdString(errors.front().message)));
        return;
    }
    const plan::Prediction& p = *a.prediction;
    const plan::Layout& l = a.layout;
    auto set = [this](const char* key, const QString& text, const QString& tip) {
        QLabel* w = label(QString::fromLatin1(key));
        w->setText(text);
        w->setToolTip(tip);
    };
    set("step", formatSeconds(p.stepTime), explain::stepTime(l, p));
    set("tokens", QLocale().toString(p.tokensPerSecond, 'f', 0), explain::tokensPerSecond(l, p));
    set("tflops", QLocale().toString(p.tflopsPerGpu, p.tflopsPerGpu < 1 ? 'g' : 'f', p.tflopsPerGpu < 1 ? 3 : 1),
        explain::tflopsPerGpu(l, p));
    // MFU from model FLOPs; HFU beside it where recomputation makes the devices compute more.
    set("mfu",
        QLocale().toString(100.0 * p.mfu, 'f', 1) + QStringLiteral(" %")
            + (p.hfu > p.mfu ? tr(" (HFU %1 %)").arg(QLocale().toString(100.0 * p.hfu, 'f', 1)) : QString()),
        explain::mfu(l, p));
    // The bubble the pipeline costs is the busiest stage's; the others' extra idle time is imbalance.
    const auto pct = [](double f) { return QLocale().toString(100.0 * f, 'f', 1) + QStringLiteral(" %"); };
    set("bubble",
        tr("%1 at stage %2, the bottleneck (closed form %3)")
            .arg(pct(p.bottleneckBubbleFraction))
            .arg(p.bottleneckStage)
            .arg(pct(p.bubbleTheory)),
        explain::bubble(l, p));
    set("imbalance", pct(p.loadImbalance), explain::imbalance(l, p));
    set("memory",
        tr("%1 of %2 — %3").arg(gb(p.memory.total()), gb(p.memoryCapacityGB), p.fits ? tr("fits") : tr("does not fit")),
        explain::memory(l, p, QStringLiteral("total")));
    label(QStringLiteral("memory"))->setStyleSheet(p.fits ? QString() : QStringLiteral("color: #C01F1F;"));

    const double parts[] = { p.compute, p.tpExposed, p.cpExposed, p.ppExposed, p.dpExposed, p.bubble, p.optimizer };
    std::vector<StackedBar::Part> split;
    for (std::size_t i = 0; i < std::size(kSplit); ++i) {
        const QString key = QString::fromLatin1(kSplit[i].key);
        const QString tip = explain::stepPart(l, p, key);
        split.push_back({ tr(kSplit[i].caption), parts[i], kSplit[i].color, tip });
        set(QStringLiteral("split.%1").arg(key).toLatin1().constData(),
            swatch(kSplit[i].color) + tr(kSplit[i].caption) + QStringLiteral(" ") + formatSeconds(parts[i]), tip);
    }
    m_split->setParts(std::move(split));

    // Every part of the estimate, so that the bar's parts add up to the total it is drawn against.
    const double mem[] = { p.memory.params, p.memory.grads, p.memory.optimizer, p.memory.activations, p.memory.reserve,
        p.memory.gathered, p.memory.fp8State, p.memory.residual };
    static_assert(std::size(mem) == std::size(kMemory));
    std::vector<StackedBar::Part> memory;
    for (std::size_t i = 0; i < std::size(kMemory); ++i) {
        const QString key = QString::fromLatin1(kMemory[i].key);
        const QString tip = explain::memory(l, p, key);
        memory.push_back({ tr(kMemory[i].caption), mem[i], kMemory[i].color, tip });
        set(QStringLiteral("memory.%1").arg(key).toLatin1().constData(),
            swatch(kMemory[i].color) + tr(kMemory[i].caption) + QStringLiteral(" ") + gb(mem[i]), tip);
        label(QStringLiteral("memory.") + key)->setVisible(!kMemory[i].optional || mem[i] != 0);
    }
    m_memory->setParts(std::move(memory), p.memoryCapacityGB);
    m_memory->setToolTip(explain::memory(l, p, QStringLiteral("total")));

    QStringList notes;
    for (const auto& w : a.diagnostics.warnings())
        notes << QString::fromStdString(w.message);
    status->setText(notes.join(QLatin1Char('\n')));
}

} // namespace loom::views

#pragma once

#include "engine/plan/ClusterSpec.h"
#include "engine/trace/TraceEvent.h"

#include <QColor>
#include <QPen>

namespace loom::views {

// The colour meanings of docs/workbench.md (Okabe–Ito, colour-blind safe), the same in every view.
namespace colors {
inline const QColor forward { 0x00, 0x72, 0xB2 };
inline const QColor backward { 0x00, 0x9E, 0x73 };
inline const QColor recompute { 0x56, 0xB4, 0xE9 };
inline const QColor tensorComm { 0xE6, 0x9F, 0x00 };
inline const QColor pipelineComm { 0xCC, 0x79, 0xA7 };
inline const QColor dataComm { 0xD5, 0x5E, 0x00 };
inline const QColor optimizer { 0xF0, 0xE4, 0x42 };
inline const QColor idle { 0xD9, 0xD9, 0xD9 };
inline const QColor misc { 0x99, 0x99, 0x99 };
inline const QColor overBudget { 0xC0, 0x1F, 0x1F };
// Context parallelism (ring attention's K/V exchange, CP groups on the map): a dark purple apart from the
// Okabe–Ito event colours above.
inline const QColor contextComm { 0x6A, 0x3D, 0x9A };
inline const QColor expertComm { 0x00, 0x00, 0x00 }; // the palette's black: MoE all-to-all
// Zero-bubble schedules' W (weight gradients of a split backward): Paul Tol's colour-blind-safe olive, apart
// from the backward's green and the greys.
inline const QColor weight { 0x99, 0x99, 0x33 };
// Imported GPU traces' launches (the host call that queued device work): a dark grey, host time that is no work.
inline const QColor launch { 0x5A, 0x5A, 0x5A };
} // namespace colors

// How a CP group is outlined on the map and in its legend: dashed, in the context colour.
QPen contextGroupPen();

// The colour of an event by what it is (compute kind, or which parallel dimension a collective serves:
// `group` is the kind of its GroupInfo, Other when unknown, which colours a collective as data-parallel).
QColor eventColor(trace::EventKind kind, trace::GroupKind group = trace::GroupKind::Other);

// Pipeline stages on the map: a categorical palette distinct from the event colours (Tableau's 10 light
// tints, cycled), so a stage fill is never mistaken for a forward or backward pass.
QColor stageColor(std::int64_t stage);

// How a link class is drawn: NVLink/NVSwitch thick, PCIe medium, InfiniBand dashed, Ethernet dotted,
// shared memory thin.
QPen linkPen(plan::LinkKind kind);
QString linkName(plan::LinkKind kind);

} // namespace loom::views

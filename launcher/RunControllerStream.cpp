// RunController's reading of the telemetry stream: frames into the store and the signals, the failure's
// tail (whole lines, no frame pieces), refused and unreadable frames, a resumed run's continuation.
#include "launcher/RunController.h"

#include "engine/trace/TelemetryFrames.h"
#include "launcher/RankLogs.h"
#include "launcher/RunChecks.h"

namespace loom::launcher {

void RunController::handleFrame(const trace::Frame& frame)
{
    m_sinceFrame.restart();
    trace::TelemetryFrame typed;
    try {
        typed = trace::decode(frame);
    } catch (const trace::FrameError& e) { // passed its CRC but cannot be read: skip it, say why once
        if (m_badFrames++ == 0)
            m_tail += QStringLiteral("loom: skipped a telemetry frame: %1\n").arg(QString::fromUtf8(e.what()));
        return;
    }
    switch (trace::typeOf(typed)) {
    case trace::FrameType::Run: // the launcher wrote the layout itself; only where the run starts is news
        runFrame(std::get<trace::RunFrame>(typed));
        break;
    case trace::FrameType::Groups:
        emit groupsReceived(std::get<trace::GroupsFrame>(typed).groups);
        break;
    case trace::FrameType::Events: {
        const auto& events = std::get<trace::EventsFrame>(typed).events;
        for (std::size_t i = 0; i < events.size(); ++i)
            if (const QString bad = eventProblem(events[i], m_request.layout.parallel.worldSize(), m_request.steps);
                !bad.isEmpty()) {
                if (m_badFrames++ == 0)
                    m_tail += QStringLiteral("loom: skipped a telemetry frame: its event %1: %2\n").arg(i).arg(bad);
                return;
            }
        if (m_store && m_run)
            m_store->addEvents(m_run, events);
        emit eventsArrived(static_cast<qint64>(events.size()));
        emit eventsReceived(events);
        break;
    }
    case trace::FrameType::Step: {
        const auto& f = std::get<trace::StepFrame>(typed);
        profiles::StepRecord s;
        s.step = f.step;
        s.loss = f.loss;
        s.tokensPerSecond = f.tokensPerSecond;
        s.stepTimeSeconds = f.stepTimeSeconds;
        s.gradNorm = f.gradNorm;
        s.lr = f.lr;
        s.flopsPerSecond = f.flopsPerSecond; // the whole frame: FLOP rates and each rank's memory too
        s.hardwareFlopsPerSecond = f.hardwareFlopsPerSecond;
        s.memoryHighWaterBytes.assign(f.memoryHighWaterBytes.begin(), f.memoryHighWaterBytes.end());
        m_steps = s.step;
        if (m_store && m_run)
            m_store->addStep(m_run, s);
        emit stepFinished(s, m_request.steps);
        break;
    }
    case trace::FrameType::Checkpoint: {
        const auto& f = std::get<trace::CheckpointFrame>(typed);
        const QString path = QString::fromStdString(f.path);
        if (m_store && m_run)
            m_store->addCheckpoint(m_run, f.step, path);
        emit checkpointSaved(f.step, path);
        break;
    }
    case trace::FrameType::End:
        m_sawEnd = true;
        break;
    case trace::FrameType::Error: { // the first rank to fail says why; the others fail because it did
        const auto& f = std::get<trace::ErrorFrame>(typed);
        if (!m_errorCause.isEmpty())
            break;
        // The frame's words are a rank's: its rank number is checked against the world, its text escaped.
        const QString message = causeText(QString::fromStdString(f.message));
        m_errorCause = world().knowsRank(f.rank)
            ? QStringLiteral("rank %1 failed: %2").arg(f.rank).arg(message)
            : QStringLiteral("a rank failed (its error frame names rank %1, outside the run's %2 ranks): %3")
                  .arg(f.rank)
                  .arg(m_request.layout.parallel.worldSize())
                  .arg(message);
        break;
    }
    }
}

QString RunController::failureCause() const
{
    // The error frame says it in words the engine chose; the log is read only for failures without one.
    return m_errorCause.isEmpty() ? launcher::causeFromLog(m_tail, world()) : m_errorCause;
}

void RunController::readOutput()
{
    // In pieces: a flood of output is parsed (and its frames stored) a megabyte at a time.
    while (m_process && m_process->bytesAvailable() > 0)
        feed(m_process->read(1 << 20));
}

void RunController::reportRefusedFrames()
{
    trace::RefusedFrame refused;
    while (m_reader.nextRefused(refused)) {
        // Every frame but an error frame comes from rank 0, which gathers the other ranks' events.
        const QString type
            = refused.type.empty() ? QStringLiteral("unknown type") : QString::fromStdString(refused.type);
        const QString from = type == QLatin1String("error") ? QStringLiteral("a rank") : QStringLiteral("rank 0");
        const QString size = refused.declaredBytes > 0
            ? QStringLiteral("%1 MiB").arg(static_cast<double>(refused.declaredBytes) / (1 << 20), 0, 'f', 1)
            : QStringLiteral("more than %1 MiB").arg(kMaxFrameBytes >> 20);
        m_tail += QStringLiteral("loom: refused a telemetry frame (%1, %2) from %3: a frame may hold at most %4 MiB; "
                                 "it is not stored\n")
                      .arg(type, size, from)
                      .arg(kMaxFrameBytes >> 20);
    }
}

void RunController::feed(const QByteArray& chunk)
{
    if (chunk.isEmpty())
        return;
    m_reader.feed(std::string_view(chunk.constData(), static_cast<std::size_t>(chunk.size())));
    addToTail(chunk);
    reportRefusedFrames();
    trace::Frame frame;
    while (m_reader.next(frame)) {
        try {
            handleFrame(frame);
        } catch (const std::exception& e) {
            storeFailed(QString::fromUtf8(e.what()));
        }
    }
}

void RunController::addToTail(const QByteArray& chunk)
{
    // Whole lines only: a frame that the pipe cut in two would otherwise leave its second half (JSON, CRC)
    // in the failure's tail as if it were a message. An over-long line is cut once: the rest of it, up to
    // its line break, is dropped as it arrives (a 60 MiB frame must not flood the tail with its body).
    QByteArray data = chunk;
    if (m_tailSkipToBreak) {
        const qsizetype br = data.indexOf('\n');
        if (br < 0)
            return;
        data.remove(0, br + 1);
        m_tailSkipToBreak = false;
    }
    m_tailLine += data;
    const qsizetype lastBreak = m_tailLine.lastIndexOf('\n');
    if (lastBreak >= 0) {
        for (const QByteArray& line : m_tailLine.left(lastBreak).split('\n'))
            if (!line.isEmpty() && !line.startsWith('\x1e'))
                m_tail += QString::fromUtf8(line.left(400)) + QLatin1Char('\n');
        m_tailLine.remove(0, lastBreak + 1);
    }
    if (m_tailLine.size() > 4096) {
        if (!m_tailLine.startsWith('\x1e')) // a long line without an end: keep its start
            m_tail += QString::fromUtf8(m_tailLine.left(400)) + QLatin1Char('\n');
        m_tailLine.clear(); // the rest of an over-long frame is not text either
        m_tailSkipToBreak = true;
    }
    if (m_tail.size() > 6000)
        m_tail = m_tail.right(4000);
}

void RunController::addRankLogsToTail()
{
    int read = 0;
    for (const RankLogFile& f : rankLogFiles(rankLogDir(m_request.workDir), 256)) {
        if (f.stream != QLatin1String("stderr") || read++ >= 64)
            continue;
        QString error;
        const QString text = readLogTail(f.path, 4096, &error);
        for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            if (!line.startsWith(QLatin1Char('['))) // not readLogTail's own notes
                m_tail += line.left(400) + QLatin1Char('\n');
    }
    if (m_tail.size() > 6000)
        m_tail = m_tail.right(4000);
}

void RunController::runFrame(const trace::RunFrame& frame)
{
    if (frame.firstStep <= 1 || !m_request.resume)
        return;
    // A continuation: name the run whose checkpoint it starts from (the newest run with a checkpoint of
    // that step in this folder), on record in the run's command.
    const qint64 after = frame.firstStep - 1;
    qint64 earlier = 0;
    try {
        if (m_store && m_run)
            for (const auto& r : m_store->runs())
                if (r.id != m_run)
                    for (const auto& c : m_store->checkpoints(r.id))
                        if (c.step == after && c.path.startsWith(m_request.checkpointDir))
                            earlier = r.id;
        const QString said = earlier > 0
            ? QStringLiteral("continues run %1 from its checkpoint at step %2").arg(earlier).arg(after)
            : QStringLiteral("continues from the checkpoint at step %1 in %2").arg(after).arg(m_request.checkpointDir);
        m_tail += QStringLiteral("loom: this run %1\n").arg(said);
        if (m_store && m_run)
            m_store->setCommand(m_run, m_command.join(QLatin1Char(' ')) + QStringLiteral("  (%1)").arg(said));
        emit notice(QStringLiteral("this run ") + said);
    } catch (const std::exception& e) {
        storeFailed(QString::fromUtf8(e.what()));
    }
}

} // namespace loom::launcher

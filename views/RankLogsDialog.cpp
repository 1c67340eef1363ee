#include "views/RankLogsDialog.h"

#include "launcher/RankLogs.h"

#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace loom::views {

RankLogsDialog::RankLogsDialog(qint64 runId, const QString& command, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Logs of run %1").arg(runId));
    auto* layout = new QVBoxLayout(this);
    m_where = new QLabel;
    m_where->setWordWrap(true);
    m_where->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_where);
    auto* split = new QHBoxLayout;
    m_files = new QListWidget;
    m_files->setMaximumWidth(220);
    m_text = new QPlainTextEdit;
    m_text->setReadOnly(true);
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    m_text->setFont(mono);
    split->addWidget(m_files);
    split->addWidget(m_text, 1);
    layout->addLayout(split, 1);
    auto* close = new QDialogButtonBox(QDialogButtonBox::Close);
    connect(close, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(close);
    resize(900, 560);

    const launcher::RankLogs logs = launcher::rankLogsOf(command);
    const auto found = logs.dir.isEmpty() ? std::vector<launcher::RankLogFile> {} : launcher::rankLogFiles(logs.dir);
    if (logs.dir.isEmpty())
        m_where->setText(tr("This run kept no log per rank (it started before Loom kept them, or its run folder's "
                            "name holds characters a shell would read). The run panel shows the tail of its "
                            "output when it fails."));
    else if (found.empty())
        m_where->setText(logs.onCluster
                ? tr("Each rank's log is on the cluster's head node, in %1/1/rank.N/stdout and stderr.").arg(logs.dir)
                : tr("No rank log in %1 (yet): the ranks write there once they start.").arg(logs.dir));
    else
        m_where->setText(tr("Each rank's output, in %1.").arg(logs.dir));
    for (const launcher::RankLogFile& f : found) {
        auto* item = new QListWidgetItem(tr("rank %1 · %2").arg(f.rank).arg(f.stream), m_files);
        item->setData(Qt::UserRole, f.path);
        item->setToolTip(f.path);
    }
    connect(m_files, &QListWidget::currentRowChanged, this, &RankLogsDialog::showFile);
    if (m_files->count() > 0)
        m_files->setCurrentRow(0);
}

void RankLogsDialog::showFile(int row)
{
    const QListWidgetItem* item = m_files->item(row);
    if (!item) {
        m_text->clear();
        return;
    }
    QString error;
    const QString text = launcher::readLogTail(item->data(Qt::UserRole).toString(), kShownBytes, &error);
    m_text->setPlainText(error.isEmpty() ? (text.isEmpty() ? tr("(empty)") : text) : error);
    m_text->moveCursor(QTextCursor::End);
}

} // namespace loom::views

#include "views/ExplainDock.h"
#include "views/ExplainTopics.h"

#include <QComboBox>
#include <QLabel>
#include <QSignalBlocker>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace loom::views {

const std::vector<std::pair<QString, QString>>& ExplainDock::topics()
{
    return explainTopics();
}

ExplainDock::ExplainDock(Source source, QWidget* parent)
    : QWidget(parent)
    , m_source(std::move(source))
{
    auto* layout = new QVBoxLayout(this);
    m_topics = new QComboBox;
    m_topics->addItem(tr("Choose a figure (or right-click one: Explain this number)"), QString());
    for (const auto& [key, caption] : topics())
        m_topics->addItem(caption, key);
    m_topics->setObjectName(QStringLiteral("explainTopic"));
    m_browser = new QTextBrowser;
    m_browser->setOpenExternalLinks(false);
    layout->addWidget(m_topics);
    layout->addWidget(m_browser, 1);
    connect(m_topics, &QComboBox::activated, this, [this](int i) { showTopic(m_topics->itemData(i).toString()); });
}

bool ExplainDock::showTopic(const QString& key)
{
    const int index = m_topics->findData(key);
    if (index < 0)
        return false;
    m_topic = key;
    const QSignalBlocker block(m_topics);
    m_topics->setCurrentIndex(index);
    refresh();
    emit topicChanged(key);
    return true;
}

QString ExplainDock::text() const
{
    return m_browser->toPlainText();
}

void ExplainDock::refresh()
{
    if (m_topic.isEmpty()) {
        m_browser->setHtml(
            tr("<p>Right-click any figure of the Prediction panel and choose <b>Explain this number</b>, "
               "or pick one above: its formula is shown here with the layout's values.</p>"));
        return;
    }
    QString body = m_source ? m_source(m_topic) : QString();
    if (body.isEmpty())
        body = tr("No value yet: the layout has no prediction (fix its problems first) or no run has been shown.");
    m_browser->setHtml(QStringLiteral("<h3>%1</h3><p>%2</p>").arg(m_topics->currentText().toHtmlEscaped(), body));
}

} // namespace loom::views

#include "views/teaching/LessonDock.h"

#include <QButtonGroup>
#include <QComboBox>
#include <QDockWidget>
#include <QEvent>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSettings>
#include <QTabBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QTimer>

#include <QVBoxLayout>
#include <algorithm>
#include <utility>

namespace loom::views {

namespace {
// The highlight's colour: the orange of UI attention, thick enough to be seen on any panel.
const QColor kHighlight(0xE6, 0x9F, 0x00);

QString key(const QString& id, const char* what)
{
    return QStringLiteral("lessons/%1/%2").arg(id, QLatin1String(what));
}
} // namespace

LessonHighlight::LessonHighlight(QWidget* window)
    : QWidget(window)
{
    setAttribute(Qt::WA_TransparentForMouseEvents);
    setAttribute(Qt::WA_NoSystemBackground);
    setObjectName(QStringLiteral("lessonHighlight"));
    hide();
}

void LessonHighlight::setTarget(QWidget* target)
{
    if (m_target)
        for (QWidget* w = m_target; w && w != parentWidget(); w = w->parentWidget())
            w->removeEventFilter(this);
    m_target = target;
    if (m_target)
        for (QWidget* w = m_target; w && w != parentWidget(); w = w->parentWidget())
            w->installEventFilter(this);
    follow();
}

bool LessonHighlight::eventFilter(QObject* watched, QEvent* event)
{
    switch (event->type()) {
    case QEvent::Move:
    case QEvent::Resize:
    case QEvent::Show:
    case QEvent::Hide:
    case QEvent::ParentChange:
        follow();
        break;
    default:
        break;
    }
    return QWidget::eventFilter(watched, event);
}

void LessonHighlight::follow()
{
    QWidget* window = parentWidget();
    QWidget* t = m_target;
    QRect rect;
    if (t && t->isVisible()) {
        // Scrolled into view when it is in a scroll area; then the part not clipped by it.
        for (QWidget* w = t->parentWidget(); w && w != window; w = w->parentWidget())
            if (auto* area = qobject_cast<QScrollArea*>(w)) {
                area->ensureWidgetVisible(t);
                break;
            }
        const QRect visible = t->visibleRegion().boundingRect();
        if (!visible.isEmpty())
            rect = QRect(t->mapTo(window, visible.topLeft()), visible.size());
    }
    if (rect.isEmpty())
        if (auto* dock = qobject_cast<QDockWidget*>(t)) {
            // A dock behind another tab: frame its tab instead.
            for (QTabBar* bar : window->findChildren<QTabBar*>())
                for (int i = 0; bar->isVisible() && i < bar->count(); ++i)
                    if (bar->tabText(i) == dock->windowTitle())
                        rect = QRect(bar->mapTo(window, bar->tabRect(i).topLeft()), bar->tabRect(i).size());
        }
    if (rect.isEmpty()) {
        hide();
        // A dock just brought forward lays its widgets out a moment later: look again then.
        if (t && t->isVisible() && m_retries++ < 10)
            QTimer::singleShot(50, this, [this] { follow(); });
        return;
    }
    m_retries = 0;
    setGeometry(rect.adjusted(-4, -4, 4, 4));
    show();
    raise();
    update();
}

void LessonHighlight::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(QPen(kHighlight, 3.5));
    p.setBrush(QColor(kHighlight.red(), kHighlight.green(), kHighlight.blue(), 28));
    p.drawRoundedRect(QRectF(rect()).adjusted(2, 2, -2, -2), 5, 5);
}

LessonDock::LessonDock(std::vector<Lesson> lessons, Hooks hooks, QWidget* parent)
    : QWidget(parent)
    , m_lessons(std::move(lessons))
    , m_hooks(std::move(hooks))
{
    auto* layout = new QVBoxLayout(this);
    m_lessonBox = new QComboBox;
    m_lessonBox->setObjectName(QStringLiteral("lessonChoice"));
    layout->addWidget(m_lessonBox);
    m_text = new QTextBrowser;
    m_text->setMinimumHeight(120);
    m_position = new QLabel;
    m_instruction = new QLabel;
    m_instruction->setWordWrap(true);
    m_instruction->setTextFormat(Qt::RichText);
    QFont bold = m_instruction->font();
    bold.setBold(true);
    m_instruction->setFont(bold);
    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_status->setObjectName(QStringLiteral("lessonStatus"));
    m_feedback = new QLabel;
    m_feedback->setWordWrap(true);
    m_feedback->setTextFormat(Qt::RichText);
    for (QWidget* w : std::initializer_list<QWidget*> { m_position, m_instruction, m_status, m_feedback })
        layout->addWidget(w);
    m_question = new QGroupBox(tr("Question"));
    auto* q = new QVBoxLayout(m_question);
    m_questionText = new QLabel;
    m_questionText->setWordWrap(true);
    q->addWidget(m_questionText);
    m_choices = new QButtonGroup(this);
    m_answer = new QLabel;
    m_answer->setWordWrap(true);
    m_answer->setTextFormat(Qt::RichText);
    m_answer->setObjectName(QStringLiteral("lessonAnswer"));
    q->addWidget(m_answer);
    m_reveal = new QPushButton(tr("Show answer"));
    m_reveal->setObjectName(QStringLiteral("lessonReveal"));
    q->addWidget(m_reveal, 0, Qt::AlignLeft);
    layout->addWidget(m_question);
    auto* buttons = new QHBoxLayout;
    m_back = new QPushButton(tr("◀ Back"));
    m_showMe = new QPushButton(tr("Show me"));
    m_showMe->setToolTip(tr("Do this step for me, through the same controls"));
    m_next = new QPushButton(tr("Next ▶"));
    m_restart = new QPushButton(tr("Restart"));
    for (QPushButton* b : { m_back, m_restart, m_showMe, m_next })
        buttons->addWidget(b);
    layout->addLayout(buttons);
    // The step first, where the eye goes; the lesson's text (read once) below it.
    layout->addWidget(m_text, 1);

    fillLessonBox();
    connect(
        m_lessonBox, &QComboBox::activated, this, [this](int i) { startLesson(m_lessonBox->itemData(i).toString()); });
    connect(m_back, &QPushButton::clicked, this, &LessonDock::back);
    connect(m_next, &QPushButton::clicked, this, &LessonDock::next);
    connect(m_showMe, &QPushButton::clicked, this, [this] { showMe(); });
    connect(m_restart, &QPushButton::clicked, this, [this] {
        if (current())
            startLesson(current()->id);
    });
    connect(m_choices, &QButtonGroup::idClicked, this, &LessonDock::answer);
    connect(m_reveal, &QPushButton::clicked, this, &LessonDock::reveal);
    showStep();
}

void LessonDock::fillLessonBox()
{
    const QSignalBlocker block(m_lessonBox);
    m_lessonBox->clear();
    m_lessonBox->addItem(tr("Choose a lesson…"), QString());
    for (const Lesson& l : m_lessons)
        m_lessonBox->addItem(QStringLiteral("%1%2. %3")
                                 .arg(lessonDone(l.id) ? QStringLiteral("✓ ") : QString())
                                 .arg(l.order)
                                 .arg(l.title),
            l.id);
    m_lessonBox->setCurrentIndex(current() ? m_lessonBox->findData(current()->id) : 0);
}

bool LessonDock::lessonDone(const QString& id) const
{
    return QSettings().value(key(id, "done"), false).toBool();
}

bool LessonDock::startLesson(const QString& id)
{
    const auto it = std::find_if(m_lessons.begin(), m_lessons.end(), [&](const Lesson& l) { return l.id == id; });
    if (it == m_lessons.end())
        return false;
    m_current = int(it - m_lessons.begin());
    m_step = 0;
    m_passedSteps.clear();
    QSettings().setValue(QStringLiteral("lessons/current"), id);
    if (m_hooks.start)
        m_hooks.start(*it);
    m_startFacts = m_hooks.facts ? m_hooks.facts() : Facts {};
    fillLessonBox();
    showStep();
    return true;
}

const LessonStep* LessonDock::currentStep() const
{
    const Lesson* l = current();
    return l && m_step < int(l->steps.size()) ? &l->steps[std::size_t(m_step)] : nullptr;
}

void LessonDock::showStep()
{
    const Lesson* l = current();
    m_back->setEnabled(l && m_step > 0);
    m_showMe->setEnabled(l != nullptr);
    m_restart->setEnabled(l != nullptr);
    if (!l) {
        m_text->setHtml(tr("<h3>Lessons</h3><p>A course in parallel training, done in this window: each lesson starts "
                           "from a layout, asks you to change it, predict, run and compare, and checks what you see. "
                           "Choose one above; the widget each step is about is framed in orange.</p>"));
        for (QWidget* w :
            std::initializer_list<QWidget*> { m_position, m_instruction, m_status, m_feedback, m_question })
            w->hide();
        m_next->setEnabled(false);
        m_target = nullptr;
        m_shownHtml.clear();
        if (m_highlight)
            m_highlight->setTarget(nullptr);
        return;
    }
    const LessonStep& s = l->steps[std::size_t(m_step)];
    m_stepFacts = m_hooks.facts ? m_hooks.facts() : Facts {};
    m_answerShown = false;
    m_position->setText(tr("Step %1 of %2").arg(m_step + 1).arg(l->steps.size()));
    for (QWidget* w : std::initializer_list<QWidget*> { m_position, m_instruction, m_status, m_feedback })
        w->show();
    for (QAbstractButton* b : m_choices->buttons()) {
        m_choices->removeButton(b);
        delete b;
    }
    m_answer->clear();
    m_answer->hide();
    m_reveal->show();
    m_question->setVisible(s.question.has_value());
    if (s.question) {
        m_questionText->setText(s.question->text);
        auto* box = static_cast<QVBoxLayout*>(m_question->layout());
        for (int i = 0; i < s.question->choices.size(); ++i) {
            auto* r = new QRadioButton(s.question->choices[i]);
            m_choices->addButton(r, i);
            box->insertWidget(1 + i, r);
        }
    }
    // The widget the step is about: its dock in front (unless opening that dock is the step), then framed.
    QWidget* target = m_hooks.widget ? m_hooks.widget(s.widget) : nullptr;
    if (target && !qobject_cast<QDockWidget*>(target))
        for (QWidget* w = target->parentWidget(); w; w = w->parentWidget()) {
            if (auto* tabs = qobject_cast<QTabWidget*>(w)) // the Strategy panel's groups are tabs
                for (int i = 0; i < tabs->count(); ++i)
                    if (tabs->widget(i)->isAncestorOf(target))
                        tabs->setCurrentIndex(i);
            if (auto* area = qobject_cast<QScrollArea*>(w))
                area->ensureWidgetVisible(target);
            if (auto* dock = qobject_cast<QDockWidget*>(w)) {
                dock->show();
                dock->raise();
                break;
            }
        }
    if (!m_highlight && window() != this)
        m_highlight = new LessonHighlight(window());
    m_target = target;
    refresh();
    emit stepChanged();
}

CheckResult LessonDock::refresh()
{
    const LessonStep* s = currentStep();
    if (!s)
        return {};
    const Facts facts = m_hooks.facts ? m_hooks.facts() : Facts {};
    const CheckResult r = evaluateCheck(s->check, facts);
    // A step passed once stays passed: looking at another figure afterwards must not fail it again.
    if (r.pass)
        m_passedSteps.insert(m_step);
    m_passed = m_passedSteps.count(m_step) > 0;
    m_status->setText(r.pass ? QStringLiteral("✓ ") + r.detail
            : m_passed       ? tr("✓ done (now: %1)").arg(r.detail)
                             : QStringLiteral("… ") + r.detail);
    m_status->setStyleSheet(m_passed ? QStringLiteral("color: #2E7D32;") : QString());
    showTexts(*s, facts);
    const Lesson* l = current();
    const bool last = m_step + 1 >= int(l->steps.size());
    m_next->setEnabled(m_passed);
    m_next->setText(!last                           ? tr("Next ▶")
            : m_current + 1 < int(m_lessons.size()) ? tr("Done: next lesson ▶")
                                                    : tr("Done"));
    if (r.pass)
        saveProgress();
    if (r.pass && m_playTo > m_step)
        QTimer::singleShot(0, this, [this] {
            if (m_playTo > m_step && m_passed && next()) {
                if (m_step < m_playTo)
                    showMe();
                else
                    emit playedTo(std::exchange(m_playTo, -1));
            }
        });
    frame();
    return r;
}

TextFacts LessonDock::textFacts(const Facts& now, const LessonStep* step) const
{
    return { &now, &m_stepFacts, &m_startFacts, step ? &step->action : nullptr };
}

void LessonDock::showTexts(const LessonStep& s, const Facts& now)
{
    // Figures come from the facts the checks read; those not known when the lesson or the step began (the
    // prediction of a layout just opened) are taken from the first facts that have them.
    m_stepFacts.insert(now.begin(), now.end());
    m_startFacts.insert(now.begin(), now.end());
    const Lesson* l = current();
    const QString html = QStringLiteral("<h3>%1</h3>%2")
                             .arg(l->title.toHtmlEscaped(), fillLessonText(l->text, textFacts(now, nullptr)));
    if (html != m_shownHtml) { // unchanged text keeps the reader's scroll position
        m_shownHtml = html;
        m_text->setHtml(html);
    }
    m_instruction->setText(fillLessonText(s.instruction, textFacts(now, &s)));
    // A step's feedback often explains its question's answer: it waits until the question is answered.
    if (m_passed && s.question && !m_answerShown)
        m_feedback->setText(tr("Now answer the question below; the explanation follows your answer."));
    else
        m_feedback->setText(fillLessonText(m_passed ? s.pass : s.fail, textFacts(now, &s)));
}

void LessonDock::frame()
{
    // The frame goes when the lesson is over (its last step passed) or the dock is closed.
    const Lesson* l = current();
    const bool over = !l || (m_step + 1 >= int(l->steps.size()) && m_passed);
    if (m_highlight)
        m_highlight->setTarget(over || !isVisible() ? nullptr : m_target.data()); // the layout may have moved it
}

void LessonDock::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    if (m_highlight)
        m_highlight->setTarget(nullptr);
}

void LessonDock::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    frame();
}

void LessonDock::reveal()
{
    const LessonStep* s = currentStep();
    if (!s || !s->question)
        return;
    if (auto* b = m_choices->button(s->question->answer))
        b->setChecked(true);
    m_answerShown = true;
    m_answer->setText(
        tr("<b>The answer:</b> %1. %2")
            .arg(s->question->choices.value(s->question->answer).toHtmlEscaped(), s->question->explanation));
    m_answer->show();
    m_reveal->hide();
    showTexts(*s, m_hooks.facts ? m_hooks.facts() : Facts {});
}

QString LessonDock::statusText() const
{
    return m_status->text();
}

void LessonDock::saveProgress()
{
    const Lesson* l = current();
    QSettings settings;
    settings.setValue(key(l->id, "step"), std::max(settings.value(key(l->id, "step"), 0).toInt(), m_step + 1));
    if (m_step + 1 == int(l->steps.size()) && !lessonDone(l->id)) {
        settings.setValue(key(l->id, "done"), true);
        fillLessonBox();
    }
}

bool LessonDock::showMe(QString* why)
{
    const LessonStep* s = currentStep();
    QString reason;
    const bool ok = s && m_hooks.perform && m_hooks.perform(s->action, &reason);
    if (!ok && s)
        m_feedback->setText(tr("Could not do it: %1").arg(reason.toHtmlEscaped()));
    if (why)
        *why = reason;
    refresh();
    return ok;
}

bool LessonDock::next()
{
    const Lesson* l = current();
    if (!l || !m_passed)
        return false;
    if (m_step + 1 >= int(l->steps.size())) {
        // Done: the next lesson, or the list of lessons (showStep without a lesson takes the frame away).
        if (m_current + 1 < int(m_lessons.size()))
            return startLesson(m_lessons[std::size_t(m_current + 1)].id);
        m_current = -1;
        m_step = 0;
        fillLessonBox();
        showStep();
        return true;
    }
    ++m_step;
    showStep();
    return true;
}

void LessonDock::playTo(int step)
{
    const Lesson* l = current();
    if (!l)
        return;
    m_playTo = std::clamp(step, 0, int(l->steps.size()) - 1);
    if (m_playTo <= m_step) {
        emit playedTo(std::exchange(m_playTo, -1));
        return;
    }
    showMe();
}

bool LessonDock::back()
{
    if (!current() || m_step == 0)
        return false;
    --m_step;
    showStep();
    return true;
}

bool LessonDock::answer(int choice)
{
    const LessonStep* s = currentStep();
    if (!s || !s->question)
        return false;
    const bool right = choice == s->question->answer;
    if (auto* b = m_choices->button(choice))
        b->setChecked(true);
    m_answerShown = true;
    m_answer->setText((right ? tr("<b>Right.</b> ") : tr("<b>Not quite.</b> ")) + s->question->explanation);
    m_answer->show();
    m_reveal->hide();
    showTexts(*s, m_hooks.facts ? m_hooks.facts() : Facts {});
    return right;
}

} // namespace loom::views

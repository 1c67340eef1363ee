#pragma once

// Shared by the views tests: layouts read from the examples with the built-in profiles.

#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"

#include <QFile>
#include <QtTest>

namespace loom::views::test {

inline plan::Layout exampleLayout(const char* name)
{
    QFile f(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/") + QLatin1String(name));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read example %s", name);
    const QByteArray bytes = f.readAll();
    auto r = plan::readLayout(
        std::string_view(bytes.constData(), std::size_t(bytes.size())), profiles::BuiltinProfiles::instance());
    if (!r.ok())
        qFatal("example %s is not valid: %s", name, r.diagnostics.format().c_str());
    return *r.layout;
}

inline plan::Layout tinyLayout()
{
    return exampleLayout("tiny-local.json");
}
inline plan::Layout megatron1t()
{
    return exampleLayout("megatron-1t-3072-a100.json");
}

} // namespace loom::views::test

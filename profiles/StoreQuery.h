#pragma once

#include "profiles/Store.h"

#include <QSqlError>
#include <QSqlQuery>
#include <QString>

namespace loom::profiles {

// Prepares `sql` on `query`, or throws StoreError naming the store and SQLite's reason ("no such table:
// events"). Unchecked, a statement that cannot be prepared fails later with Qt's "Parameter count mismatch",
// which says nothing about the store.
inline void prepareQuery(const QString& storePath, QSqlQuery& query, const QString& sql)
{
    if (query.prepare(sql))
        return;
    const QString why = query.lastError().text();
    throw StoreError((why.contains(QLatin1String("no such"))
            ? QStringLiteral("store %1: its tables are not those of this Loom (%2); the store is damaged or was "
                             "changed by another program")
            : QStringLiteral("store %1: cannot prepare a query on it (%2)"))
                         .arg(storePath, why.trimmed())
                         .toStdString());
}

} // namespace loom::profiles

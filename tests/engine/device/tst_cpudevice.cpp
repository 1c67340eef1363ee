// CpuDevice: typed buffers round-trip through every copy kind, fills set what they say, allocation is
// aligned as CUDA's, events measure the host time between their records and refuse unrecorded ones.
#include "engine/device/CpuDevice.h"

#include <QTest>

#include <chrono>
#include <cstdint>
#include <numeric>

using namespace loom::device;

class TstCpuDevice : public QObject {
    Q_OBJECT
private slots:
    void kindAndName()
    {
        CpuDevice device;
        QCOMPARE(device.kind(), DeviceKind::Cpu);
        QCOMPARE(QString::fromStdString(device.name()), QString("cpu"));
        QCOMPARE(QString(deviceKindName(DeviceKind::Cpu)), QString("cpu"));
        QCOMPARE(QString(deviceKindName(DeviceKind::Cuda)), QString("cuda"));
    }

    void allocationIsAligned_data()
    {
        QTest::addColumn<int>("bytes");
        QTest::newRow("1 byte") << 1;
        QTest::newRow("255 bytes") << 255;
        QTest::newRow("256 bytes") << 256;
        QTest::newRow("1 MiB + 3") << (1 << 20) + 3;
    }
    void allocationIsAligned()
    {
        QFETCH(int, bytes);
        CpuDevice device;
        void* p = device.allocateBytes(std::size_t(bytes));
        QVERIFY(p);
        QCOMPARE(reinterpret_cast<std::uintptr_t>(p) % 256, std::uintptr_t(0));
        device.fillBytes(p, 0xab, std::size_t(bytes)); // the whole size is writable
        QCOMPARE(static_cast<unsigned char*>(p)[bytes - 1], (unsigned char)0xab);
        device.freeBytes(p);
    }

    void zeroBytesIsNull()
    {
        CpuDevice device;
        QCOMPARE(device.allocateBytes(0), nullptr);
        device.freeBytes(nullptr);
        Buffer<float> empty(device, 0);
        QVERIFY(empty.download().empty());
    }

    void hugeAllocationThrows()
    {
        CpuDevice device;
        QVERIFY_THROWS_EXCEPTION(DeviceError, device.allocateBytes(std::size_t(-1) - 10));
    }

    void copiesRoundTrip_data()
    {
        QTest::addColumn<int>("count");
        QTest::newRow("one") << 1;
        QTest::newRow("odd") << 1001;
        QTest::newRow("large") << (1 << 18);
    }
    void copiesRoundTrip()
    {
        QFETCH(int, count);
        CpuDevice device;
        std::vector<float> host(static_cast<std::size_t>(count));
        std::iota(host.begin(), host.end(), -3.5f);
        Buffer<float> a(device, host.size());
        Buffer<float> b(device, host.size());
        a.upload(host);
        Stream stream = device.createStream();
        device.copyBytes(b.data(), a.data(), a.bytes(), CopyKind::DeviceToDevice, stream);
        device.synchronize(stream);
        device.destroyStream(stream);
        QCOMPARE(b.download(), host);
        QCOMPARE(a.download(), host);
    }

    void uploadOfWrongSizeThrows()
    {
        CpuDevice device;
        Buffer<float> a(device, 4);
        std::vector<float> three(3, 1.0f);
        QVERIFY_THROWS_EXCEPTION(DeviceError, a.upload(three));
    }

    void fills_data()
    {
        QTest::addColumn<float>("value");
        QTest::newRow("one") << 1.0f;
        QTest::newRow("negative") << -0.25f;
        QTest::newRow("zero") << 0.0f;
    }
    void fills()
    {
        QFETCH(float, value);
        CpuDevice device;
        Buffer<float> a(device, 37);
        device.fillBytes(a.data(), 0xff, a.bytes()); // NaN pattern first, so the float fill must overwrite it
        device.fillFloats(a.data(), value, a.size());
        for (float x : a.download())
            QCOMPARE(x, value);
        device.fillBytes(a.data(), 0, a.bytes());
        for (float x : a.download())
            QCOMPARE(x, 0.0f);
    }

    void bufferMoves()
    {
        CpuDevice device;
        Buffer<int> a(device, 8);
        int* raw = a.data();
        Buffer<int> b(std::move(a));
        QCOMPARE(b.data(), raw);
        QCOMPARE(b.size(), std::size_t(8));
        QCOMPARE(a.data(), nullptr);
        Buffer<int> c(device, 2);
        c = std::move(b);
        QCOMPARE(c.data(), raw);
        QCOMPARE(c.device(), &device);
    }

    void streamsAreDistinct()
    {
        CpuDevice device;
        Stream s1 = device.createStream();
        Stream s2 = device.createStream();
        QVERIFY(s1.handle && s2.handle && s1.handle != s2.handle);
        device.destroyStream(s1);
        device.destroyStream(s2);
    }

    // The elapsed time covers the host work between the records: wait until the clock has visibly moved
    // (a condition, not a fixed sleep), then check the event saw at least that much.
    void eventsMeasureHostTime()
    {
        CpuDevice device;
        Event start = device.createEvent();
        Event end = device.createEvent();
        Stream stream = device.createStream();
        device.recordEvent(start, stream);
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2)) { }
        device.recordEvent(end, stream);
        device.waitEvent(Stream {}, end);
        device.synchronizeEvent(end);
        const double ms = device.elapsedMs(start, end);
        QVERIFY2(ms >= 2.0, qPrintable(QString("elapsed %1 ms").arg(ms)));
        QVERIFY(device.elapsedMs(end, start) <= 0.0);
        device.destroyStream(stream);
        device.destroyEvent(start);
        device.destroyEvent(end);
    }

    void unrecordedEventThrows()
    {
        CpuDevice device;
        Event a = device.createEvent();
        Event b = device.createEvent();
        device.recordEvent(a);
        QVERIFY_THROWS_EXCEPTION(DeviceError, device.elapsedMs(a, b));
        QVERIFY_THROWS_EXCEPTION(DeviceError, device.recordEvent(Event {}));
        device.destroyEvent(a);
        device.destroyEvent(b);
    }
};

QTEST_GUILESS_MAIN(TstCpuDevice)
#include "tst_cpudevice.moc"

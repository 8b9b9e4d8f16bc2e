"""The live screen's device and CPU sparklines: the UI's own sampler once a second, or the
job's own counters while it sends them (a bench measures beside its workers)."""

from __future__ import annotations

import time

from fsscope.engine.events import Event
from fsscope.telemetry.columns import cpu_busy_pct, device_rates
from fsscope.tui import messages as msg
from fsscope.tui.screens.live_views import LiveViews
from fsscope.tui.widgets.spark_panel import SparkPanel

JOB_TELEMETRY_FRESH_S = 3.0  # the job's own counters win over the UI's sampler this long


class LiveTelemetry(LiveViews):
    _job_telemetry_s: float | None  # when the job last sent its own counters
    _last_job_telemetry: dict[int, float]  # run -> its last sample's t_s

    def on_telemetry_tick(self, message: msg.TelemetryTick) -> None:
        """The UI's own sampler (psutil, once a second); a job that sends its own counters
        (bench) is measured beside its workers, so those win while they keep coming."""
        last = self._job_telemetry_s
        if last is None or time.monotonic() - last >= JOB_TELEMETRY_FRESH_S:
            self._add_telemetry(message.iops, message.bytes_per_s, message.cpu_percent, message.device)

    def _job_telemetry(self, event: Event) -> None:
        """A bench's ``telemetry`` event: disk deltas per device since its last sample."""
        from fsscope.workloads.bench_records import TelemetrySample  # loaded with the bench's model

        if not isinstance(event, TelemetrySample):
            return
        sample = event.sample
        last = self._last_job_telemetry.get(event.run, 0.0)
        self._last_job_telemetry[event.run] = sample.t_s
        dt = sample.t_s - last if sample.t_s > last else 1.0
        device = ",".join(sample.disk_read_count) or "no device"
        iops, bps = device_rates(dt, sum(sample.disk_read_count.values()) + sum(sample.disk_write_count.values()),
                                 sum(sample.disk_read_bytes.values()) + sum(sample.disk_write_bytes.values()))
        idle = sample.cpu_idle_pct
        cpu = float(cpu_busy_pct(idle if idle is not None else 100.0))
        self._job_telemetry_s = time.monotonic()
        self._add_telemetry(iops, bps, cpu, device)

    def _add_telemetry(self, iops: float, bytes_per_s: float, cpu_percent: float, device: str) -> None:
        self.iops.add(iops)
        self.bandwidth.add(bytes_per_s / 1e6)
        self.cpu.add(cpu_percent)
        sparks = self.query_one("#sparks", SparkPanel)
        where = device or "all disks"
        sparks.show("iops", list(self.iops.values), f"{iops:,.0f} {where}"[:14])
        sparks.show("bw", list(self.bandwidth.values), f"{bytes_per_s / 1e6:,.1f} MB/s")
        sparks.show("cpu", list(self.cpu.values), f"{cpu_percent:.0f} %")


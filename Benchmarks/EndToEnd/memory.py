#!/usr/bin/env python3
"""Where the daemon's memory goes at venue scale, and its peak while it publishes every style
again to a broker that lost them all. Run it with scripts/memory-scale (it builds what this
uses).

One daemon (release build, state file, journal, styles published QoS 1 retained) on a local
mosquitto without persistence:

1. fill: one update for each of LOCATIONS new locations, until the broker acknowledged every
   style; the resident memory then (after the heap is trimmed) and its peak;
2. broker lost everything: the broker is stopped and started again on the same port, empty;
   the daemon reconnects, finds no session, reads back nothing and publishes every style
   again: the time from the broker's start to the last style acknowledged, the resident
   memory's peak meanwhile, the most publications outstanding (waiting or in flight) the
   daemon reported, and the retained styles the broker holds at the end;
3. a start on an empty broker: the daemon stopped (SIGTERM), the broker started empty again,
   the daemon started: the time to READY=1 and to the last style acknowledged, the peak of the
   new process, and the memory once done.

Memory is reported as the process's resident set divided by the locations (the whole
process, its empty baseline included), the figure the bound of 512 bytes a location is
about. With --failover the daemon runs as the one replica of a failover partition (it claims
the lease and publishes as the active one)."""
import argparse, os, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def start_broker(folder, port, inflight):
    config = os.path.join(folder, "mosquitto.conf")
    with open(config, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                f"max_queued_messages 2000000\nmax_queued_bytes 0\nmax_inflight_messages {inflight}\n"
                f"log_dest file {folder}/mosquitto.log\n")
    os.chmod(folder, 0o777)
    process = subprocess.Popen(["mosquitto", "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            bench.socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise SystemExit("mosquitto did not start")


def stop(process):
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


class Sampler:
    """Samples the daemon's resident memory and its outstanding publications while it runs:
    those of the republication that follows the convergence after `finished_before` (until it
    begins, the metric still tells of the one before, such as the start's, when the fill's
    live changes may have waited with it)."""

    def __init__(self, pid, http, finished_before=0, interval=0.1):
        self.pid, self.http, self.interval = pid, http, interval
        self.finished_before = finished_before
        self.peak_rss = 0
        self.peak_outstanding = 0
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while self.running:
            try:
                self.peak_rss = max(self.peak_rss, bench.resident_bytes(self.pid))
                values = bench.metrics(self.http)
                if values.get(FINISHED, 0) > self.finished_before:
                    self.peak_outstanding = max(self.peak_outstanding, int(values.get("livedata_republish_outstanding_peak", 0)))
            except Exception:
                pass
            time.sleep(self.interval)

    def finish(self):
        self.running = False
        self.thread.join()
        self.peak_rss = max(self.peak_rss, bench.resident_bytes(self.pid))
        return self


FINISHED = 'livedata_convergences_total{outcome="finished"}'


def wait_republished(http, timeout, finished_before=0):
    """Waits until a convergence after `finished_before` finished and the broker acknowledged
    every style."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            values = bench.metrics(http)
        except OSError:
            time.sleep(0.1)
            continue
        if (values.get(FINISHED, 0) > finished_before and values.get("livedata_ready", 0) == 1 and values.get("livedata_output_waiting", 1) == 0
                and values.get("livedata_output_in_flight", 1) == 0 and values.get("livedata_republish_remaining", 0) == 0):
            return time.monotonic() - started
        time.sleep(0.1)
    raise SystemExit(f"the styles were not all acknowledged within {timeout} s")


def retained_styles(port, expected):
    """The retained styles the broker holds (read until `expected` came, or 120 s passed)."""
    output = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", "livedata/style/#", "--retained-only",
                             "-C", str(expected), "-W", "120", "-F", "%t"], capture_output=True, text=True).stdout
    return sum(1 for line in output.splitlines() if line.startswith("livedata/style/bench/"))


def peak_resident_bytes(pid):
    return int(bench.peak_resident_mb(pid) * 1024) * 1024


def reset_peak(pid):
    """Starts the process's peak resident memory (VmHWM) again from its current size."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def mimalloc_summary(log_path, when):
    """With MIMALLOC_SHOW_STATS set: prints mimalloc's account of the daemon's heap, which it
    writes to the daemon's log as it exits (its peak and current reserved and committed
    memory, and the peak of the blocks in use)."""
    if not os.environ.get("MIMALLOC_SHOW_STATS"):
        return
    wanted = ("heap stats", "reserved", "committed", "touched", "process")
    with open(log_path, errors="replace") as log:
        lines = [line.rstrip() for line in log if line.strip().lower().startswith(wanted)]
    print(f"  mimalloc, {when}:\n    " + "\n    ".join(lines[-12:]), flush=True)


def run(args, folder):
    port, http = bench.free_port(), bench.free_port()
    broker_folder = os.path.join(folder, "broker")
    os.makedirs(broker_folder)
    broker = start_broker(broker_folder, port, args.broker_inflight)
    config = os.path.join(folder, "livedata.yaml")
    failover = ("instance: memory-1\npartition:\n  name: memory\n  failover: true\n  owns:\n    - {dataset: bench}\n"
                if args.failover else "")
    with open(config, "w") as f:
        f.write(bench.RULES.replace("log: {level: warning}", "log: {level: info}") + failover
                + f"store: {{path: {folder}/state.db}}\n"
                + f"broker: {{host: 127.0.0.1, port: {port}, clientId: memory-daemon, bufferedSocket: true}}\n"
                + f"http: {{listen: \"127.0.0.1:{http}\"}}\n")
    result = {}
    daemon, _ = bench.start_daemon(args, config, os.path.join(folder, "daemon.log"), http)
    try:
        result["empty_bytes"] = bench.resident_bytes(daemon.pid)
        # 1. The fill.
        started = time.monotonic()
        publisher = bench.publish(args.tools, port, args, count=args.locations)
        publisher.wait(timeout=1200)
        while int(bench.metrics(http).get("livedata_updates_received_total", 0)) < args.locations:
            time.sleep(0.2)
        bench.wait_drained(http, 600)
        result["fill_s"] = time.monotonic() - started
        time.sleep(args.settle)
        result["fill_peak"] = peak_resident_bytes(daemon.pid)
        result["filled"] = bench.resident_bytes(daemon.pid)
        bench.heap_stats(daemon.pid, os.path.join(folder, "daemon.log"), "after the fill")
        # 2. The broker loses everything while the daemon runs.
        finished = bench.metrics(http).get(FINISHED, 0)
        reset_peak(daemon.pid)
        stop(broker)
        sampler = Sampler(daemon.pid, http, finished)
        broker = start_broker(broker_folder, port, args.broker_inflight)
        result["reconnect_republish_s"] = wait_republished(http, 1200, finished)
        sampler.finish()
        result["reconnect_peak"] = max(peak_resident_bytes(daemon.pid), sampler.peak_rss)
        result["reconnect_outstanding"] = sampler.peak_outstanding
        result["reconnect_retained"] = retained_styles(port, args.locations)
        time.sleep(args.settle)
        result["after_reconnect"] = bench.resident_bytes(daemon.pid)
        bench.heap_stats(daemon.pid, os.path.join(folder, "daemon.log"), "after republishing")
        # 3. A start that finds the broker empty.
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=120)
        mimalloc_summary(os.path.join(folder, "daemon.log"), "the first daemon (fill, broker restarted empty)")
        stop(broker)
        broker = start_broker(broker_folder, port, args.broker_inflight)
        started = time.monotonic()
        daemon, result["start_ready_s"] = bench.start_daemon(args, config, os.path.join(folder, "daemon-start.log"), http)
        sampler = Sampler(daemon.pid, http)
        wait_republished(http, 1200)
        result["start_republish_s"] = time.monotonic() - started
        sampler.finish()
        result["start_peak"] = max(peak_resident_bytes(daemon.pid), sampler.peak_rss)
        result["start_outstanding"] = sampler.peak_outstanding
        result["start_retained"] = retained_styles(port, args.locations)
        time.sleep(args.settle)
        result["after_start"] = bench.resident_bytes(daemon.pid)
        bench.heap_stats(daemon.pid, os.path.join(folder, "daemon-start.log"), "after the start's republishing")
        return result
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=120)
            mimalloc_summary(os.path.join(folder, "daemon-start.log"), "the second daemon (a start on an empty broker)")
        stop(broker)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--livedata", required=True)
    parser.add_argument("--tools", required=True)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--locations", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=1_000, help="the publisher's window")
    parser.add_argument("--rate", type=float, default=0, help="pace the fill's publisher at N updates a second")
    parser.add_argument("--broker-inflight", type=int, default=20, metavar="N",
                        help="the broker's max_inflight_messages (mosquitto's default, 20, unless given)")
    parser.add_argument("--failover", action="store_true", help="run the daemon as the one replica of a failover partition")
    parser.add_argument("--settle", type=float, default=6, metavar="SECONDS",
                        help="how long to wait after each phase before reading the resident memory (the free heap goes back "
                        "to the system a moment after a burst)")
    args = parser.parse_args()
    args.updates = args.locations
    mode = "failover active" if args.failover else "single daemon"
    print(f"{args.locations:,} locations, {mode}, broker max_inflight_messages {args.broker_inflight}, {args.runs} runs", flush=True)
    for number in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="livedata-memory-") as folder:
            r = run(args, folder)
        per = lambda value: value / args.locations  # noqa: E731
        mib = lambda value: value / 2**20  # noqa: E731
        print(f"run {number}: empty {mib(r['empty_bytes']):.0f} MiB; "
              f"fill {r['fill_s']:.1f} s, peak {mib(r['fill_peak']):.0f} MiB ({per(r['fill_peak']):.0f} B a location), "
              f"after it {mib(r['filled']):.0f} MiB ({per(r['filled']):.0f} B a location); "
              f"broker restarted empty: every style again in {r['reconnect_republish_s']:.1f} s, peak {mib(r['reconnect_peak']):.0f} MiB "
              f"({per(r['reconnect_peak']):.0f} B a location), outstanding at most {r['reconnect_outstanding']:,}, "
              f"{r['reconnect_retained']:,} retained styles, after it {mib(r['after_reconnect']):.0f} MiB "
              f"({per(r['after_reconnect']):.0f} B a location); "
              f"a start on an empty broker: ready in {r['start_ready_s']:.1f} s, every style again in {r['start_republish_s']:.1f} s, "
              f"peak {mib(r['start_peak']):.0f} MiB ({per(r['start_peak']):.0f} B a location), outstanding at most {r['start_outstanding']:,}, "
              f"{r['start_retained']:,} retained styles, after it {mib(r['after_start']):.0f} MiB ({per(r['after_start']):.0f} B a location); "
              f"styles lost {2 * args.locations - r['reconnect_retained'] - r['start_retained']}", flush=True)


if __name__ == "__main__":
    main()

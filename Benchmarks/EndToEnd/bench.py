#!/usr/bin/env python3
"""The end-to-end benchmark: the same QoS 1 stream through a local mosquitto, to a bare
libmosquitto subscriber and to `livedata serve`, alternately, each run on a fresh broker.
Run it with scripts/bench-e2e (it builds what this uses). BENCH_TRACE=1 prints the daemon's
progress and resident memory at every look."""
import argparse, json, os, re, signal, socket, statistics, subprocess, tempfile, time, urllib.request

RULES = """
subscriptions:
  - {dataset: bench}
styles:
  main: {visible: true, polygonFillColor: "#E0E0E0"}
rules:
  - {name: vacant, domain: occupancy, when: nrOfPeople == 0, style: {polygonFillColor: "#4CAF50"}}
  - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545", label: "{nrOfPeople}"}}
  - {name: hot, domain: temperature, when: temperature > 25, style: {polygonStrokeColor: "#E65100"}}
  - {name: cold, domain: temperature, when: temperature < 18, style: {polygonStrokeColor: "#1565C0"}}
  - {name: stuffy, domain: co2, when: co2Level > 1000, style: {badge: {text: "CO2 {co2Level}"}}}
  - {name: booked, domain: availability, when: available == "false", style: {icon: booked.svg}}
output: {qos: 1, retain: true}
log: {level: warning}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, folder, inflight=0):
        self.port = free_port()
        self.folder = folder
        config = os.path.join(folder, "mosquitto.conf")
        with open(config, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"max_queued_messages 2000000\nmax_queued_bytes 0\nmax_inflight_messages {inflight}\n"
                    f"log_dest file {folder}/mosquitto.log\n")
        os.chmod(folder, 0o777)
        self.process = subprocess.Popen(["mosquitto", "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if PINNED:
            os.sched_setaffinity(self.process.pid, {PINNED[1]})
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("mosquitto did not start")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


# `--pin`: the CPUs the publisher and the broker are kept on, (publisher, broker); the
# subscriber (bare or the daemon) runs where the system puts it.
PINNED = None


def publish(tools, port, args, count=None, seed=12345):
    process = subprocess.Popen([os.path.join(tools, "publisher"), str(port), str(count or args.updates), str(args.locations), str(args.window),
                                str(args.rate), str(seed)],
                               stdout=subprocess.PIPE, text=True)
    if PINNED:
        os.sched_setaffinity(process.pid, {PINNED[0]})
    return process


def per_update_us(seconds, received):
    """CPU seconds as microseconds per update received."""
    return seconds * 1e6 / max(received, 1)


def wait_cpu(process):
    """Waits for `process` to end; its CPU seconds (user and system)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def bare_run(tools, args, folder, echo=False):
    """The stream to a bare libmosquitto client that receives, or with `echo` also publishes
    one style-sized message back for each, as the daemon does; the rate runs until it is
    done (for the echo, until the broker acknowledged its last)."""
    # The echo publishes as the daemon does: its broker takes the daemon's window.
    broker = Broker(folder, inflight=args.broker_inflight if echo else 0)
    publisher = None
    try:
        subscriber = subprocess.Popen([os.path.join(tools, "bare-subscriber"), str(broker.port), "bench/#", str(args.updates), "300"]
                                      + (["echo"] if echo else []),
                                      stdout=subprocess.PIPE, text=True)
        assert subscriber.stdout.readline().strip() == "subscribed"
        broker_before = cpu_seconds(broker.process.pid)
        started = time.monotonic()
        publisher = publish(tools, broker.port, args)
        line = subscriber.stdout.readline().strip()
        subscriber.wait(timeout=310)
        elapsed = time.monotonic() - started
        broker_cpu = cpu_seconds(broker.process.pid) - broker_before
        publisher_cpu = wait_cpu(publisher)
        received = int(line.split()[1])
        cpu = float(line.split()[-2]) if "cpu" in line else 0.0
        if subscriber.returncode != 0:
            raise SystemExit(f"bare-subscriber: {line}")
        return {"rate": received / elapsed, "received": received, "cpu_us": per_update_us(cpu, received),
                "broker_us": per_update_us(broker_cpu, received), "publisher_us": per_update_us(publisher_cpu, received)}
    finally:
        if publisher and publisher.poll() is None:
            publisher.kill()
        broker.stop()


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def heap_stats(pid, log_path, when):
    """With BENCH_HEAP set: prints malloc's own account of the daemon's heap (bytes in use and
    held, per arena), which malloc_stats() writes to the daemon's log."""
    if not os.environ.get("BENCH_HEAP"):
        return
    size = os.path.getsize(log_path)
    subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "call (void) malloc_stats()"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(log_path) as log:
        log.seek(size)
        totals = [line.strip() for line in log if line.startswith(("Total", "system bytes", "in use bytes"))]
    print(f"  heap {when}: " + "; ".join(totals[-3:]), flush=True)


def cpu_seconds(pid, system_only=False):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return ((0 if system_only else int(fields[11])) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_resident_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0


def histogram_p99(values, name="livedata_processing_seconds"):
    buckets = sorted((float(re.search(r'le="([^"]+)"', k).group(1)), v) for k, v in values.items()
                     if k.startswith(name + "_bucket") and 'le="+Inf"' not in k)
    total = values.get(name + "_count", 0)
    for bound, count in buckets:
        if total and count >= 0.99 * total:
            return bound
    return float("inf")


# The system calls `--syscalls` counts one by one (all of them are counted together too).
SYSCALLS = ["read", "write", "writev", "sendto", "recvfrom", "poll", "ppoll", "epoll_wait", "ioctl", "futex",
            "clock_nanosleep", "nanosleep", "fsync", "fdatasync", "pwrite64", "pread64", "lseek", "sched_yield",
            "timerfd_settime", "epoll_ctl", "mmap", "munmap", "madvise", "setsockopt"]

# What `--counters` counts: the work itself (instructions, in the daemon and in the kernel on
# its behalf) apart from the time it took, which drifts with the machine.
COUNTERS = ["instructions:u", "instructions:k", "cycles:u", "cycles:k", "context-switches", "cpu-migrations", "page-faults"]


def resident_bytes(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_daemon(args, config, log_path, http):
    """Starts `livedata serve` and waits for /readyz; returns the process and the seconds it took."""
    log = open(log_path, "w+")
    # BENCH_WRAP: a command to run the daemon under (a heap profiler, say), split at spaces.
    wrap = os.environ.get("BENCH_WRAP", "").split()
    started = time.monotonic()
    # In a session of its own, so that the stop reaches the daemon under a wrapper too.
    daemon = subprocess.Popen(wrap + [args.livedata, "serve", "--config", config], stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=2).status == 200:
                return daemon, time.monotonic() - started
        except Exception:
            time.sleep(0.05)
    log.seek(0)
    os.killpg(daemon.pid, signal.SIGKILL)
    raise SystemExit("the daemon did not become ready:\n" + log.read()[-3000:])


def wait_drained(http, timeout=300):
    """Waits until the broker has acknowledged every style; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        values = metrics(http)
        if values.get("livedata_output_waiting", 1) == 0 and values.get("livedata_output_in_flight", 1) == 0:
            break
        time.sleep(0.05)
    return time.monotonic() - started


def check_every_location(http, port, args):
    """After a stream of one update per new location: how many locations the daemon's HTTP
    interface shows and how many retained styles the broker holds (each should be all)."""
    shown = 0
    for building in range(4):
        for floor in range(10):
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v1/floors/bench/hq/b{building}/f{floor}", timeout=60) as response:
                shown += len(json.load(response)["locations"])
    retained = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", "livedata/style/#", "--retained-only",
                               "-W", "10", "-F", "%t"], capture_output=True, text=True).stdout.split()
    return shown, sum(1 for topic in retained if topic.startswith("livedata/style/bench/"))


def daemon_run(tools, args, folder):
    broker = Broker(folder, args.broker_inflight)
    config = os.path.join(folder, "livedata.yaml")
    with open(config, "w") as f:
        http = free_port()
        rules = RULES.replace("output: {qos: 1, retain: true}", f"output: {{qos: 1, retain: true, minInterval: {args.min_interval}}}") if args.min_interval else RULES
        plain = ", bufferedSocket: false" if args.plain_socket else ", bufferedSocket: true" if args.buffered_socket else ""
        if args.output_connections: plain += f", outputConnections: {args.output_connections}"
        f.write(rules + f"store: {{path: {folder}/state.db}}\nbroker: {{host: 127.0.0.1, port: {broker.port}, clientId: bench-daemon{plain}}}\n"
                + f"http: {{listen: \"127.0.0.1:{http}\"}}\n")
    daemon, _ = start_daemon(args, config, os.path.join(folder, "daemon.log"), http)
    publisher = None
    try:
        empty = resident_bytes(daemon.pid)
        profiler = None
        if args.perf or args.syscalls or args.counters:
            # BENCH_PERF_EVENT: what to sample instead of time, e.g. "probe_libc:malloc -c 50"
            # (after `perf probe -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc`): where the
            # daemon allocates, by caller.
            event = os.environ.get("BENCH_PERF_EVENT", "").split()
            command = (["perf", "record", "-g"] + (["-e"] + event if event else []) + ["-o", args.perf] if args.perf
                       else ["perf", "stat", "-e", ",".join(COUNTERS), "-o", args.counters] if args.counters
                       else ["perf", "stat", "-e", ",".join(["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}" for name in SYSCALLS]), "-o", args.syscalls])
            profiler = subprocess.Popen(command + ["-p", str(daemon.pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        cpu_before = cpu_seconds(daemon.pid)
        system_before = cpu_seconds(daemon.pid, system_only=True)
        broker_before = cpu_seconds(broker.process.pid)
        started = time.monotonic()
        publisher = publish(tools, broker.port, args)
        received = 0
        while time.monotonic() - started < 120:
            received = int(metrics(http).get("livedata_updates_received_total", 0))
            if os.environ.get("BENCH_TRACE"):
                rss = [l.split()[1] for l in open(f"/proc/{daemon.pid}/status") if l.startswith("VmRSS")][0]
                print(f"  {time.monotonic() - started:5.2f} s: received {received:,}, RSS {int(rss) // 1024} MB", flush=True)
            if received >= args.updates:
                break
            # Asking for /metrics costs the daemon CPU too: every 200 ms until the end is
            # near, then every 10 ms for when the last update arrived.
            time.sleep(0.01 if received >= 0.97 * args.updates else 0.2)
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(daemon.pid) - cpu_before
        system = cpu_seconds(daemon.pid, system_only=True) - system_before
        broker_cpu = cpu_seconds(broker.process.pid) - broker_before
        publisher_cpu = wait_cpu(publisher)
        # Until the broker has acknowledged every style the stream changed.
        drain = wait_drained(http, args.drain_timeout)
        if profiler:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(timeout=60)
        # The whole cost of the stream: until the broker acknowledged its last style.
        completed = time.monotonic() - started
        cpu_complete = cpu_seconds(daemon.pid) - cpu_before
        # A tick or two: the free heap a burst leaves goes back to the system once it is over.
        time.sleep(2.5)
        values = metrics(http)
        memory = {"empty_mb": empty / 2**20, "filled_per_location": (resident_bytes(daemon.pid) - empty) / args.locations}
        heap_stats(daemon.pid, os.path.join(folder, "daemon.log"), "after the stream")
        if args.keep_state:
            # SQLite's online backup: a consistent copy while the daemon writes.
            import sqlite3
            os.makedirs(args.keep_state, exist_ok=True)
            with sqlite3.connect(os.path.join(folder, "state.db")) as source, \
                    sqlite3.connect(os.path.join(args.keep_state, "state.db")) as copy:
                source.backup(copy)
        if args.check:
            memory["shown"], memory["retained"] = check_every_location(http, broker.port, args)
        if args.restart:
            # A clean stop, one new update per location queued at the broker meanwhile, and a
            # start on the same state file: the time to /readyz, the restore the log reports,
            # and the memory once the backlog is done.
            memory["rss_mb"] = peak_resident_mb(daemon.pid)
            for stop, name in [(signal.SIGTERM, "sigterm"), (signal.SIGKILL, "sigkill")]:
                os.killpg(daemon.pid, stop)
                daemon.wait(timeout=60)
                backlog = publish(tools, broker.port, args, count=args.locations, seed=777 + stop)
                backlog.wait(timeout=600)
                if args.keep_state:
                    # The state file as this start finds it, byte for byte (with its WAL, if
                    # the stop left one): for a restore probe on the very file.
                    import shutil
                    kept = os.path.join(args.keep_state, f"before-start-after-{name}")
                    os.makedirs(kept, exist_ok=True)
                    for suffix in ["", "-wal"]:
                        if os.path.exists(os.path.join(folder, "state.db" + suffix)):
                            shutil.copyfile(os.path.join(folder, "state.db" + suffix), os.path.join(kept, "state.db" + suffix))
                # At info level: the start logs its restore time.
                text = open(config).read().replace("log: {level: warning}", "log: {level: info}")
                open(config, "w").write(text)
                log_path = os.path.join(folder, f"daemon-after-{name}.log")
                daemon, memory[f"ready_{name}_s"] = start_daemon(args, config, log_path, http)
                memory[f"read_{name}"] = int(metrics(http).get("livedata_convergence_read_total", 0))
                match = re.search(r"restore\.milliseconds=(\d+)", open(log_path).read())
                memory[f"restore_{name}_ms"] = int(match.group(1)) if match else None
                # Until the backlog is processed and its styles acknowledged.
                while int(metrics(http).get("livedata_updates_received_total", 0)) < args.locations:
                    time.sleep(0.2)
                wait_drained(http)
                time.sleep(6)
                memory[f"rss_{name}_per_location"] = (resident_bytes(daemon.pid) - empty) / args.locations
                heap_stats(daemon.pid, log_path, f"after {name.upper()} and the backlog")
        return {
            "rate": received / elapsed, "received": received,
            "cpu_us": per_update_us(cpu, received), "system_us": per_update_us(system, received),
            "complete_rate": received / completed, "cpu_complete_us": per_update_us(cpu_complete, received),
            "broker_us": per_update_us(broker_cpu, received),
            "publisher_us": per_update_us(publisher_cpu, received),
            "published": int(values.get("livedata_derived_changes_published_total", 0)),
            "rss_mb": peak_resident_mb(daemon.pid),
            **memory,
            "p99_ms": histogram_p99(values) * 1000,
            "lag_p99_ms": histogram_p99(values, "livedata_publish_lag_seconds") * 1000,
            "drain_s": drain,
            "queue_peak": int(values.get("livedata_intake_queue_peak", 0)),
            "coalesced": int(values.get("livedata_derived_changes_coalesced_total", 0)),
        }
    finally:
        if publisher and publisher.poll() is None:
            publisher.kill()
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=30)
        broker.stop()


def partitioned_run(tools, args, folder, partitions):
    """The same stream to `partitions` daemons on one broker, each owning its share of the
    four buildings (`partition.owns`): their combined rate (every update received by one of
    them), and their CPU per update together, until the broker acknowledged every style."""
    broker = Broker(folder, args.broker_inflight)
    buildings = [f"b{number}" for number in range(4)]
    daemons, publisher = [], None
    try:
        for index in range(partitions):
            own = buildings[index::partitions]
            directory = os.path.join(folder, f"p{index}")
            os.makedirs(directory)
            http = free_port()
            config = os.path.join(directory, "livedata.yaml")
            owns = "".join(f"\n    - {{dataset: bench, venue: hq, building: {building}}}" for building in own)
            with open(config, "w") as f:
                f.write(RULES + f"instance: p{index}\npartition:\n  name: p{index}\n  owns:{owns}\n"
                        + f"store: {{path: {directory}/state.db}}\nbroker: {{host: 127.0.0.1, port: {broker.port}, clientId: bench-p{index}}}\n"
                        + f"http: {{listen: \"127.0.0.1:{http}\"}}\n")
            daemon, _ = start_daemon(args, config, os.path.join(directory, "daemon.log"), http)
            daemons.append((daemon, http))
        def received():
            return sum(int(metrics(http).get("livedata_updates_received_total", 0)) for _, http in daemons)
        cpu_before = [cpu_seconds(daemon.pid) for daemon, _ in daemons]
        broker_before = cpu_seconds(broker.process.pid)
        started = time.monotonic()
        publisher = publish(tools, broker.port, args)
        total = 0
        while time.monotonic() - started < 300:
            total = received()
            if total >= args.updates:
                break
            time.sleep(0.01 if total >= 0.97 * args.updates else 0.2)
        elapsed = time.monotonic() - started
        wait_cpu(publisher)
        for _, http in daemons:
            wait_drained(http)
        completed = time.monotonic() - started
        cpu = sum(cpu_seconds(daemon.pid) - before for (daemon, _), before in zip(daemons, cpu_before))
        broker_cpu = cpu_seconds(broker.process.pid) - broker_before
        return {"rate": total / elapsed, "complete_rate": total / completed, "received": total,
                "cpu_complete_us": per_update_us(cpu, total), "broker_us": per_update_us(broker_cpu, total),
                "rss_mb": sum(peak_resident_mb(daemon.pid) for daemon, _ in daemons)}
    finally:
        if publisher and publisher.poll() is None:
            publisher.kill()
        for daemon, _ in daemons:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=30)
        broker.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--livedata", required=True)
    parser.add_argument("--tools", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--locations", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=1_000)
    parser.add_argument(
        "--drain-timeout", type=float, default=300, metavar="SECONDS",
        help="how long to wait after the stream for the broker to acknowledge every style (an older build "
        "without the output metrics never says it has: give it a few seconds)")
    parser.add_argument("--check", action="store_true",
                        help="after the stream, count the locations GET /v1/floors shows and the retained styles (each should be every location)")
    parser.add_argument("--restart", action="store_true",
                        help="after the stream, stop the daemon with SIGTERM, queue one update per location, start it again (time to ready, "
                             "restore, memory once done); then the same with SIGKILL")
    parser.add_argument("--rate", type=float, default=0, metavar="N",
                        help="pace the publisher at N updates a second (default: as fast as its window allows)")
    parser.add_argument("--broker-inflight", type=int, default=0, metavar="N",
                        help="the daemon's broker's max_inflight_messages (0: unlimited; mosquitto's default is 20)")
    parser.add_argument("--min-interval", metavar="DURATION", help="run the daemon with output.minInterval, e.g. 100ms")
    parser.add_argument("--perf", metavar="FILE", help="record the daemon with `perf record -g` into FILE")
    parser.add_argument("--plain-socket", action="store_true", help="run the daemon with broker.bufferedSocket: false (libmosquitto's own socket calls; the default)")
    parser.add_argument("--output-connections", type=int, default=0, metavar="N",
                        help="run the daemon with broker.outputConnections: N (default: the daemon's own)")
    parser.add_argument("--buffered-socket", action="store_true", help="run the daemon with broker.bufferedSocket: true (socket calls through buffers)")
    parser.add_argument("--keep-state", metavar="DIR", help="after the stream, copy the daemon's state file to DIR/state.db (for a restore probe); with --restart, also the state file as each start finds it, byte for byte, to DIR/before-start-after-SIGNAL/")
    parser.add_argument("--daemon-only", action="store_true", help="leave out the bare baselines (to compare two builds of the daemon)")
    parser.add_argument("--pin", action="store_true",
                        help="keep the publisher on CPU 0 and the broker on CPU 1 in every run (bare and daemon alike); "
                             "on two cores the scheduler otherwise sometimes puts both on one CPU for a whole run, "
                             "which then sets the pace of everything")
    parser.add_argument("--counters", metavar="FILE", help="count the daemon's instructions, cycles, context switches and page faults with `perf stat` into FILE")
    parser.add_argument("--syscalls", metavar="FILE", help="count the daemon's system calls with `perf stat` into FILE")
    parser.add_argument("--partitions", type=int, default=0, metavar="N",
                        help="compare one daemon with N daemons on one broker, each owning a share of the four buildings (partition.owns)")
    args = parser.parse_args()
    if args.pin:
        global PINNED
        PINNED = (0, 1)
    if args.partitions:
        print(f"{args.updates} QoS 1 updates over {args.locations} locations x 5 domains, publisher window {args.window}, broker "
              f"max_inflight_messages {args.broker_inflight}; one daemon and {args.partitions} partitioned daemons alternating, {args.runs} runs", flush=True)
        ones, manys = [], []
        for run in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory(prefix="livedata-bench-") as folder:
                os.makedirs(f"{folder}/one"); os.makedirs(f"{folder}/many")
                one = daemon_run(args.tools, args, f"{folder}/one")
                many = partitioned_run(args.tools, args, f"{folder}/many", args.partitions)
            ones.append(one); manys.append(many)
            print(f"run {run}: one daemon {one['rate']:,.0f} updates/s, {one['complete_rate']:,.0f}/s until the last style was acknowledged, "
                  f"{one['cpu_complete_us']:.1f} us CPU/update, broker {one['broker_us']:.1f} us/update, peak {one['rss_mb']:.0f} MB; "
                  f"{args.partitions} daemons {many['rate']:,.0f} updates/s together, {many['complete_rate']:,.0f}/s until the last style was "
                  f"acknowledged, {many['cpu_complete_us']:.1f} us CPU/update together, broker {many['broker_us']:.1f} us/update, "
                  f"peak {many['rss_mb']:.0f} MB together; rate ratio {many['complete_rate'] / one['complete_rate']:.2f}; "
                  f"lost {args.updates - many['received']}", flush=True)
        print(f"median: one daemon {statistics.median(r['complete_rate'] for r in ones):,.0f}/s, "
              f"{statistics.median(r['cpu_complete_us'] for r in ones):.1f} us/update; {args.partitions} daemons "
              f"{statistics.median(r['complete_rate'] for r in manys):,.0f}/s, {statistics.median(r['cpu_complete_us'] for r in manys):.1f} us/update")
        return
    pace = f", paced at {args.rate:,.0f}/s" if args.rate else ""
    print(f"{args.updates} QoS 1 updates over {args.locations} locations x 5 domains, publisher window {args.window}{pace}, "
          f"daemon's broker max_inflight_messages {args.broker_inflight}; "
          f"{args.runs} runs, bare and daemon alternating", flush=True)
    ratios, results = [], []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="livedata-bench-") as folder:
            os.makedirs(f"{folder}/bare"); os.makedirs(f"{folder}/daemon")
            os.makedirs(f"{folder}/echo")
            if args.daemon_only:
                bare = echo = dict.fromkeys(["rate", "cpu_us", "broker_us", "publisher_us"], float("nan"))
            else:
                bare = bare_run(args.tools, args, f"{folder}/bare")
                echo = bare_run(args.tools, args, f"{folder}/echo", echo=True)
            daemon = daemon_run(args.tools, args, f"{folder}/daemon")
        ratio = daemon["rate"] / bare["rate"]
        daemon["echo_ratio"] = daemon["complete_rate"] / echo["rate"]
        ratios.append(ratio); results.append(daemon)
        lost = args.updates - daemon["received"]
        print(f"run {run}: bare {bare['rate']:,.0f} msg/s ({bare['cpu_us']:.1f} us CPU/msg; broker {bare['broker_us']:.1f}, publisher {bare['publisher_us']:.1f}); "
              f"daemon {daemon['rate']:,.0f} msg/s (broker {daemon['broker_us']:.1f}, publisher {daemon['publisher_us']:.1f} us CPU/update); ratio {ratio:.2f}; "
              f"daemon CPU {daemon['cpu_us']:.1f} us/update (system {daemon['system_us']:.1f}); "
              f"until the last style was acknowledged: bare echo {echo['rate']:,.0f} msg/s ({echo['cpu_us']:.1f} us CPU/msg; broker {echo['broker_us']:.1f}), "
              f"daemon {daemon['complete_rate']:,.0f} updates/s, ratio {daemon['echo_ratio']:.2f}, daemon CPU {daemon['cpu_complete_us']:.1f} us/update; derived changes published {daemon['published']:,}"
              + (f" (coalesced {daemon['coalesced']:,})" if args.min_interval else "") + "; "
              f"peak RSS {daemon['rss_mb']:.0f} MB; intake queue peak {daemon['queue_peak']:,}; processing p99 <= {daemon['p99_ms']:g} ms; "
              f"publication lag p99 <= {daemon['lag_p99_ms']:g} ms, output drained {daemon['drain_s']:.2f} s after the last update; lost {lost}; "
              f"resident memory {daemon['empty_mb']:.0f} MB empty, {daemon['filled_per_location']:,.0f} bytes per location after the stream"
              + (f"; every location checked: {daemon['shown']:,} shown by GET /v1/floors, {daemon['retained']:,} retained styles "
                 f"(expected {min(args.updates, args.locations):,} each)" if args.check else "")
              + "".join(f"; after {name.upper()} and {args.locations:,} updates queued: ready in {daemon[f'ready_{name}_s']:.2f} s "
                        f"({daemon[f'read_{name}']:,} retained messages read back), restore {daemon[f'restore_{name}_ms']} ms, "
                        f"{daemon[f'rss_{name}_per_location']:,.0f} bytes per location once done"
                        for name in (["sigterm", "sigkill"] if args.restart else [])), flush=True)
    print(f"median: ratio {statistics.median(ratios):.2f}; daemon CPU {statistics.median(r['cpu_us'] for r in results):.1f} us/update; "
          f"until the last style was acknowledged: ratio to the bare echo {statistics.median(r['echo_ratio'] for r in results):.2f}, "
          f"daemon CPU {statistics.median(r['cpu_complete_us'] for r in results):.1f} us/update; "
          f"peak RSS {statistics.median(r['rss_mb'] for r in results):.0f} MB; "
          f"p99 <= {statistics.median(r['p99_ms'] for r in results):g} ms; "
          f"publication lag p99 <= {statistics.median(r['lag_p99_ms'] for r in results):g} ms")


if __name__ == "__main__":
    main()

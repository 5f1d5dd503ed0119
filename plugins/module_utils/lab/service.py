# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""One local process of the embedded cluster run as a service (module ``local_service``): started detached, stopped
with SIGTERM then SIGKILL, restarted when what it was started with changed, sent a signal to reload, and waited for
until it answers. It takes the place of start-stop-daemon and of the YAML around it that each role had a copy of.

A service ``<name>`` in ``<workdir>`` has three files:

- ``<name>.pid``: the pid in decimal and a newline, as ``start-stop-daemon --make-pidfile`` writes it, so that
  ``start-stop-daemon --stop --pidfile`` still stops it;
- ``<name>.log``: the process's stdout and stderr, appended to;
- ``<name>.service.json``: the record of what the running process was started with (its command line, the
  environment it was given, its working directory, the sha256 of each file whose change restarts or reloads it, and
  the caller's own record). A run compares it with what it is asked for to decide between nothing, a reload and a
  restart.

The pidfile names the service only while the process it names is alive, is not a zombie and runs the service's
program (``is_program``); any other pidfile is stale. Nothing here supervises the process: one that dies is
started again by the next run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import signal
import ssl
import subprocess
import tempfile
import time

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

from http.client import HTTPException
from urllib.error import HTTPError, URLError
from urllib.request import HTTPSHandler, ProxyHandler, Request, build_opener

STATES = ("started", "stopped", "restarted", "reloaded")
ACTIONS = ("none", "started", "restarted", "reloaded", "stopped")
RELOAD_SIGNALS = {"HUP": signal.SIGHUP, "USR1": signal.SIGUSR1, "USR2": signal.SIGUSR2}
# start-stop-daemon --retry TERM/<stop_timeout>/KILL/5: the seconds a process has to go after SIGKILL.
KILL_TIMEOUT = 5.0
# Without a readiness URL, how long after its start a process must still be alive.
ALIVE_CHECK_SECONDS = 0.3
LOG_TAIL_LINES = 15
# The most one readiness request may take (the process answers on loopback).
REQUEST_TIMEOUT = 5.0
# While waiting, how often the process is checked for having exited (between the readiness requests).
EXIT_CHECK_STEP = 0.05
# How often a stopping process is checked for having gone.
STOP_CHECK_INTERVAL = 0.1
# A process named by a pidfile started before the file was written; the slack absorbs the clocks' rounding and
# small steps of the wall clock.
PIDFILE_SLACK = 10.0
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

NOT_RUNNING = "not running"
COMMAND_LINE_CHANGED = "the command line changed"
ENVIRONMENT_CHANGED = "the environment changed"
CHDIR_CHANGED = "the working directory changed"
NO_RECORD = "no record of how the running process was started"


class ServiceError(Exception):
    """The service could not be brought to the state asked for. ``facts`` are what the module returns with the
    failure (``changed``, ``action``, ``reasons``, ``pid``, ``ready_seconds``) where something was already done."""

    def __init__(self, msg, **facts):
        super(ServiceError, self).__init__(msg)
        self.facts = facts


def service_paths(workdir, name):
    """``(pidfile, log, record file)`` of service ``name`` in ``workdir``."""
    base = os.path.join(workdir, name)
    return base + ".pid", base + ".log", base + ".service.json"


# The process table (proc(5)).

def process_state(pid, proc="/proc"):
    """The state letter of ``/proc/<pid>/stat`` (R, S, D, Z, ...), or None when there is no such process."""
    try:
        with open("%s/%d/stat" % (proc, pid), "rb") as handle:
            stat = handle.read()
    except (IOError, OSError):
        return None
    # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")".
    end = stat.rfind(b")")
    state = stat[end + 2:end + 3].decode("ascii", "replace") if end >= 0 else ""
    return state or None


def alive(pid, proc="/proc"):
    """Whether process ``pid`` exists and is neither a zombie nor dead."""
    return process_state(pid, proc) not in (None, "Z", "X")


def _cmdline(pid, proc):
    try:
        with open("%s/%d/cmdline" % (proc, pid), "rb") as handle:
            return [arg.decode("utf-8", "surrogateescape") for arg in handle.read().split(b"\0")[:-1]]
    except (IOError, OSError):
        return []


def _same_file(one, other):
    try:
        first, second = os.stat(one), os.stat(other)
    except (IOError, OSError):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _is_script(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except (IOError, OSError):
        return False


def is_program(pid, programs, proc="/proc"):
    """Whether process ``pid`` runs one of ``programs`` (absolute paths): the first element of its
    ``/proc/<pid>/cmdline`` is one of them, or its ``/proc/<pid>/exe`` is the same file as one of them. A script
    started through its ``#!`` line runs its interpreter, which the kernel gives the script's path as its first or
    second argument: that counts too, for a program that starts with ``#!``."""
    cmdline = _cmdline(pid, proc)
    for program in programs:
        if cmdline and cmdline[0] == program:
            return True
        if _same_file("%s/%d/exe" % (proc, pid), program):
            return True
        if program in cmdline[1:3] and _is_script(program):
            return True
    return False


def process_started(pid, proc="/proc"):
    """The Unix time at which process ``pid`` started (its start in clock ticks after boot, field 22 of
    ``/proc/<pid>/stat``, against ``/proc/uptime``), or None when unknown."""
    try:
        with open("%s/%d/stat" % (proc, pid), "rb") as handle:
            stat = handle.read()
        with open("%s/uptime" % proc) as handle:
            uptime = float(handle.read().split()[0])
        ticks = int(stat[stat.rfind(b")") + 2:].split()[19])
    except (IOError, OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / float(os.sysconf("SC_CLK_TCK")))


def started_before(pid, pidfile, proc="/proc"):
    """Whether process ``pid`` started before ``pidfile`` was last written (within ``PIDFILE_SLACK`` seconds), as the
    process a pidfile names did: one that started later reuses the pid (after a reboot, say) and is not it. True
    when either time is unknown."""
    started = process_started(pid, proc)
    try:
        written = os.stat(pidfile).st_mtime
    except (IOError, OSError):
        return True
    return started is None or started <= written + PIDFILE_SLACK


def read_pid(pidfile):
    """The pid a pidfile names, or None when it is missing or holds no pid."""
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
    except (IOError, OSError):
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def running_pid(pidfile, programs, proc="/proc"):
    """``(pid, stale)``: the pid of the live process the pidfile names when it runs one of ``programs`` (with no
    programs, any live process that is not a zombie) and started before the pidfile was written, else None;
    ``stale`` when the pidfile exists but names no such process (a dead pid, or a pid reused by another program or
    by a process started later)."""
    pid = read_pid(pidfile)
    if (pid is not None and alive(pid, proc) and started_before(pid, pidfile, proc)
            and (not programs or is_program(pid, programs, proc))):
        return pid, False
    return None, os.path.lexists(pidfile)


# The record.

def file_digest(path):
    """The sha256 of a file's content, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digests(option, paths, missing_ok=False):
    """``({path: sha256}, missing)`` of the files of ``option`` (restart_on or reload_on). A missing file is an
    error naming it, unless ``missing_ok`` (check mode: an earlier task of the run may create it), when its digest
    is None and it is listed in ``missing``."""
    digests, missing = {}, []
    for path in paths:
        if not os.path.isabs(path):
            raise ServiceError("%s: %r is not an absolute path; give each file's absolute path" % (option, path))
        try:
            digests[path] = file_digest(path)
        except (IOError, OSError) as exc:
            if missing_ok and not os.path.lexists(path):
                digests[path] = None
                missing.append(path)
                continue
            raise ServiceError("%s: cannot read %s (%s); each file of %s must exist before the process starts"
                               % (option, path, exc.strerror or exc, option))
    return digests, missing


def as_record(argv, environment, chdir, restart_on, reload_on, record):
    """The record of a process: what it is started with, as JSON stores it (so that it compares equal to the record
    read back)."""
    try:
        return json.loads(json.dumps({"argv": list(argv), "environment": dict(environment), "chdir": chdir,
                                      "restart_on": dict(restart_on), "reload_on": dict(reload_on),
                                      "record": dict(record)}, sort_keys=True))
    except (TypeError, ValueError) as exc:
        raise ServiceError("record: %s; give values that JSON can hold" % exc)


def read_record(path):
    """The stored record, or None when there is none (or it is not a record)."""
    try:
        with open(path) as handle:
            stored = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) else None


def _changed_keys(before, after):
    before, after = before if isinstance(before, dict) else {}, after if isinstance(after, dict) else {}
    keys = list(after) + sorted(key for key in before if key not in after)
    return [key for key in keys if key not in before or key not in after or before[key] != after[key]]


def differences(stored, desired):
    """``(restart, reload)``: the reasons, worded for the module's ``reasons``, why a process started with record
    ``stored`` must restart to be what ``desired`` describes, and why it must reload."""
    restart = []
    if stored.get("argv") != desired["argv"]:
        restart.append(COMMAND_LINE_CHANGED)
    if stored.get("environment") != desired["environment"]:
        restart.append(ENVIRONMENT_CHANGED)
    if stored.get("chdir") != desired["chdir"]:
        restart.append(CHDIR_CHANGED)
    restart += ["restart_on file changed: %s" % path for path in _changed_keys(stored.get("restart_on"), desired["restart_on"])]
    restart += ["record changed: %s" % key for key in _changed_keys(stored.get("record"), desired["record"])]
    reload = ["reload_on file changed: %s" % path for path in _changed_keys(stored.get("reload_on"), desired["reload_on"])]
    return restart, reload


def decide(state, pid, stored, desired):
    """``(action, reasons, record)``: what to do about a service whose process is ``pid`` (None: not running),
    started with record ``stored`` (None: unknown), to bring it to ``state`` with record ``desired`` (None for
    stopped without a command line); ``record`` is the record to store, None to leave the stored one as it is."""
    if state == "stopped":
        return ("stopped", ["state stopped"], None) if pid is not None else ("none", [], None)
    if pid is None:
        return "started", [NOT_RUNNING], desired
    restart, reload = differences(stored, desired) if stored is not None else ([NO_RECORD], [])
    if state == "restarted":
        return "restarted", ["state restarted"] + restart + reload, desired
    # A reload brings in the reload_on files and nothing else: the record says so, and keeps the rest.
    reloaded = dict(stored, reload_on=desired["reload_on"]) if stored is not None else None
    if state == "reloaded":
        return "reloaded", ["state reloaded"] + reload, reloaded
    if restart:
        return "restarted", restart, desired
    if reload:
        return "reloaded", reload, reloaded
    return "none", [], None


# Files.

def write_file(path, text, mode):
    """Write ``text`` to ``path`` whole or not at all (a file in the same directory renamed over it)."""
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.rename(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def log_tail(path, offset=0, lines=LOG_TAIL_LINES):
    """The last ``lines`` lines of the log written after byte ``offset``, worded for a failure message."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            start = max(offset, size - (1 << 16))
            handle.seek(start)
            data = handle.read()
    except (IOError, OSError) as exc:
        return "Log %s cannot be read: %s" % (path, exc.strerror or exc)
    text = data.decode("utf-8", "replace").splitlines()
    if start > offset and len(text) > 1:
        text = text[1:]  # the first line read may be the end of a longer one
    since = " since this start" if offset else ""
    if not text:
        return "Log %s is empty%s." % (path, since)
    return "Log %s%s ends with:\n%s" % (path, since, "\n".join(text[-lines:]))


# Readiness.

def probe(url, timeout=REQUEST_TIMEOUT):
    """``(status, error)``: the HTTP status ``url`` answered (redirects followed; https without a certificate check,
    the process listens on loopback; no proxy), or None and why no answer came."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    opener = build_opener(ProxyHandler({}), HTTPSHandler(context=context))
    try:
        response = opener.open(Request(url), timeout=timeout)
    except HTTPError as exc:
        exc.close()
        return exc.code, None
    except URLError as exc:
        return None, str(exc.reason)
    except (HTTPException, OSError, ValueError) as exc:
        return None, str(exc) or type(exc).__name__
    try:
        return response.getcode(), None
    finally:
        response.close()


def observed(value):
    """What a readiness read saw, in words."""
    if value is None:
        return "nothing (no request was made)"
    if value.get("status") is not None:
        return "HTTP %d" % value["status"]
    return "no answer (%s)" % value.get("error")


def exit_words(code):
    """A process's exit as ``Popen.returncode`` gives it (None: unknown), in words."""
    if code is None:
        return "with an unknown exit code (not started by this run)"
    if code < 0:
        try:
            return "killed by signal %d (%s)" % (-code, signal.Signals(-code).name)
        except ValueError:
            return "killed by signal %d" % -code
    return "with exit code %d" % code


class LocalService(object):
    """A service as the module's options describe it; ``run(state)`` does what the state asks and returns the
    module's result, or raises ServiceError. ``waiter`` (a common.waiter.Waiter) gives the clock and sleep;
    ``base_environment`` the environment ``environment`` is added to (the module's own by default)."""

    def __init__(self, name, workdir, argv=None, environment=None, chdir=None, restart_on=(), reload_on=(),
                 reload_signal="HUP", record=None, stop_timeout=15, ready_url=None, ready_status=200,
                 ready_timeout=60, ready_interval=1.0, waiter=None, base_environment=None, kill_timeout=KILL_TIMEOUT,
                 proc="/proc"):
        self.name, self.workdir = name, workdir
        self.argv = list(argv) if argv is not None else None
        self.environment = dict(environment or {})
        self.chdir = chdir or workdir
        self.restart_on, self.reload_on = list(restart_on or []), list(reload_on or [])
        self.reload_signal, self.record = reload_signal, dict(record or {})
        self.stop_timeout, self.kill_timeout = stop_timeout, kill_timeout
        self.ready_url, self.ready_status = ready_url, ready_status
        self.ready_timeout, self.ready_interval = ready_timeout, ready_interval
        self.waiter = waiter or Waiter()
        self.base_environment = os.environ if base_environment is None else base_environment
        self.proc = proc
        self.pidfile, self.log, self.record_file = service_paths(workdir, name)
        self.warnings = []

    # Checks of the options, before anything is read or done.

    def check_options(self, state, check_mode):
        if state not in STATES:
            raise ServiceError("state: %r is none of %s" % (state, ", ".join(STATES)))
        if not NAME_PATTERN.match(self.name or ""):
            raise ServiceError("name: %r cannot name files; use letters, digits, '.', '_' and '-' (not first)" % self.name)
        if not self.workdir or not os.path.isabs(self.workdir):
            raise ServiceError("workdir: %r is not an absolute path" % self.workdir)
        if self.reload_signal not in RELOAD_SIGNALS:
            raise ServiceError("reload_signal: %r is none of %s" % (self.reload_signal, ", ".join(RELOAD_SIGNALS)))
        if self.stop_timeout < 0 or self.ready_timeout < 0 or self.ready_interval <= 0:
            raise ServiceError("stop_timeout and ready_timeout must be 0 or more, ready_interval more than 0")
        if self.ready_url is not None and not re.match(r"^https?://[^/]", self.ready_url):
            raise ServiceError("ready_url: %r is not an http:// or https:// URL" % self.ready_url)
        for key, value in self.environment.items():
            if not isinstance(value, str):
                raise ServiceError("environment: the value of %s is %r, not a string; quote it" % (key, value))
        if self.argv is None:
            if state != "stopped":
                raise ServiceError("argv: state %s needs the command line (argv)" % state)
            return
        if not self.argv or not all(isinstance(arg, str) for arg in self.argv):
            raise ServiceError("argv: give the command line as a non-empty list of strings, the program first")
        program = self.argv[0]
        fix = "argv[0] must be the absolute path of the program (e.g. {{ ansible_playbook_python }}, or what `command -v` prints)"
        if not os.path.isabs(program):
            raise ServiceError("argv: %r is not an absolute path; %s" % (program, fix))
        if not os.path.exists(program):
            if not check_mode:
                raise ServiceError("argv: %s does not exist; %s" % (program, fix))
            self.warnings.append("argv: %s does not exist yet; a run that is not in check mode fails unless an earlier "
                                 "task makes it" % program)
        elif not os.path.isfile(program) or not os.access(program, os.X_OK):
            raise ServiceError("argv: %s is not an executable file; %s" % (program, fix))
        if not check_mode and self.chdir != self.workdir and not os.path.isdir(self.chdir):
            raise ServiceError("chdir: %s is not a directory" % self.chdir)

    def desired_record(self, check_mode):
        restart_on, missing = file_digests("restart_on", self.restart_on, missing_ok=check_mode)
        reload_on, missing_reload = file_digests("reload_on", self.reload_on, missing_ok=check_mode)
        for path in missing + missing_reload:
            self.warnings.append("%s does not exist yet; a run that is not in check mode fails unless an earlier task "
                                 "writes it" % path)
        return as_record(self.argv, self.environment, self.chdir, restart_on, reload_on, self.record)

    # Doing.

    def run(self, state="started", check_mode=False):
        """Bring the service to ``state``; returns the module's result (``changed``, ``action``, ``reasons``,
        ``pid``, ``log``, ``ready_seconds``, ``diff``: the record's before and after when it changes)."""
        self.check_options(state, check_mode)
        stored = read_record(self.record_file)
        desired = self.desired_record(check_mode) if self.argv is not None else None
        programs = [record["argv"][0] for record in (desired, stored)
                    if record and isinstance(record.get("argv"), list) and record["argv"]]
        pid, stale = running_pid(self.pidfile, sorted(set(programs)), self.proc)
        action, reasons, new_record = decide(state, pid, stored, desired)
        result = dict(changed=action != "none", action=action, reasons=reasons, pid=pid, log=self.log,
                      ready_seconds=None, diff=None)
        if new_record is not None and new_record != stored:
            result["diff"] = dict(before=stored or {}, after=new_record)
        try:
            if check_mode:
                if action in ("started", "restarted", "stopped"):
                    result["pid"] = None
                elif action == "none" and pid is not None and self.ready_url:
                    result["ready_seconds"] = self.check_ready(pid)
                return result
            self.apply(state, action, pid, stale, new_record, result)
        except ServiceError as exc:
            facts = dict(result, **exc.facts)
            facts.pop("diff")
            raise ServiceError(str(exc), **facts)
        return result

    def apply(self, state, action, pid, stale, record, result):
        """Do ``action`` (decided by ``decide``) and what follows it; fills ``result``'s pid and ready_seconds."""
        if state != "stopped" and not os.path.isdir(self.workdir):
            # A stopped service needs no working directory: one removed after it stopped is not made again.
            os.makedirs(self.workdir)
            os.chmod(self.workdir, 0o700)
        if action in ("stopped", "restarted"):
            self.stop(pid)
        if action == "stopped" or (action == "none" and stale and state == "stopped"):
            if os.path.lexists(self.pidfile):
                os.unlink(self.pidfile)
            result["pid"] = None
        if action in ("started", "restarted"):
            try:
                process, offset = self.start(record)
            except ServiceError as exc:
                raise ServiceError(str(exc), changed=action == "restarted", pid=None)
            result["pid"] = process.pid
            result["ready_seconds"] = self.wait_ready(process.pid, process, offset)
        elif action == "reloaded":
            self.reload(pid, record)
            result["ready_seconds"] = self.wait_ready(pid, None, None)
        elif action == "none" and pid is not None and self.ready_url:
            result["ready_seconds"] = self.check_ready(pid)

    def stop(self, pid):
        """SIGTERM, up to ``stop_timeout`` seconds for the process to go, then SIGKILL and up to ``kill_timeout``
        seconds more (start-stop-daemon --retry TERM/<stop_timeout>/KILL/5)."""
        for sig, timeout in ((signal.SIGTERM, self.stop_timeout), (signal.SIGKILL, self.kill_timeout)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            except PermissionError as exc:
                raise ServiceError("%s: cannot signal pid %d (%s)" % (self.name, pid, exc.strerror))
            gone, _value, _elapsed = self.waiter.wait(lambda: self._gone(pid), timeout, STOP_CHECK_INTERVAL)
            if gone:
                return
        raise ServiceError("%s (pid %d) still runs %g s after SIGTERM and %g s after SIGKILL (state %s)"
                           % (self.name, pid, self.stop_timeout + self.kill_timeout, self.kill_timeout,
                              process_state(pid, self.proc)), changed=True)

    def _gone(self, pid):
        try:
            os.waitpid(pid, os.WNOHANG)  # reaped if it is a child of this process (it is not in the module)
        except ChildProcessError:
            pass
        return not alive(pid, self.proc)

    def start(self, record):
        """Start the process detached (a session of its own, stdin from /dev/null, stdout and stderr appended to the
        log, no other file of this process open in it); then write the pidfile and the record. Returns the Popen and
        the log's size before the start."""
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            offset = os.fstat(fd).st_size
            env = dict(self.base_environment)
            env.update(self.environment)
            process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                                       cwd=self.chdir, env=env, start_new_session=True, close_fds=True)
        except (IOError, OSError) as exc:
            raise ServiceError("%s: cannot start %s: %s" % (self.name, self.argv[0], exc))
        finally:
            os.close(fd)
        write_file(self.pidfile, "%d\n" % process.pid, 0o644)
        write_file(self.record_file, json.dumps(record, indent=2, sort_keys=True) + "\n", 0o600)
        return process, offset

    def reload(self, pid, record):
        try:
            os.kill(pid, RELOAD_SIGNALS[self.reload_signal])
        except OSError as exc:
            raise ServiceError("%s: cannot send SIG%s to pid %d (%s)" % (self.name, self.reload_signal, pid, exc))
        if record is not None:
            write_file(self.record_file, json.dumps(record, indent=2, sort_keys=True) + "\n", 0o600)

    def _exit_code(self, pid, process):
        """None while the process runs; else its exit code (None inside when unknown), as a 1-tuple."""
        if process is not None:
            code = process.poll()
            return None if code is None else (code,)
        return None if alive(pid, self.proc) else (None,)

    def wait_ready(self, pid, process, offset):
        """After a start or a reload: poll ``ready_url`` until it answers ``ready_status`` (returns the seconds it
        took), or, without a URL, check ``ALIVE_CHECK_SECONDS`` later that the process still runs (returns None).
        Fails at once when the process exits."""
        if not self.ready_url:
            self.waiter.pause(ALIVE_CHECK_SECONDS)
            exited = self._exit_code(pid, process)
            if exited is not None:
                raise ServiceError("%s (pid %d) exited %s right after its %s. %s"
                                   % (self.name, pid, exit_words(exited[0]), "start" if process else "reload",
                                      log_tail(self.log, offset or 0)))
            return None

        def read():
            exited = self._exit_code(pid, process)
            if exited is not None:
                return {"exited": exited}
            status, error = probe(self.ready_url, min(REQUEST_TIMEOUT, max(self.ready_timeout, 1)))
            exited = self._exit_code(pid, process)
            return {"status": status, "error": error, "exited": exited}

        def predicate(value):
            return value["exited"] is not None or value["status"] == self.ready_status

        base = self.waiter

        def sleep(seconds):
            """Sleep, but wake as soon as the process exits."""
            end = base.monotonic() + seconds
            while self._exit_code(pid, process) is None:
                left = end - base.monotonic()
                if left <= 0:
                    return
                base.sleep(min(EXIT_CHECK_STEP, left))

        held, value, elapsed = Waiter(monotonic=base.monotonic, sleep=sleep, wall=base.wall).wait(
            read, self.ready_timeout, self.ready_interval, predicate)
        if value["exited"] is not None:
            raise ServiceError("%s (pid %d) exited %s after %.1f s of waiting for %s to answer HTTP %d. %s"
                               % (self.name, pid, exit_words(value["exited"][0]), elapsed, self.ready_url,
                                  self.ready_status, log_tail(self.log, offset or 0)), ready_seconds=None)
        if not held:
            raise ServiceError("%s (pid %d) did not become ready within %g s: %s did not answer HTTP %d; last "
                               "observed: %s. %s"
                               % (self.name, pid, self.ready_timeout, self.ready_url, self.ready_status,
                                  observed(value), log_tail(self.log, offset or 0)), ready_seconds=None)
        return round(elapsed, 3)

    def check_ready(self, pid):
        """Nothing changed and the process runs: one request to ``ready_url``, no wait; returns its seconds."""
        start = self.waiter.monotonic()
        status, error = probe(self.ready_url, REQUEST_TIMEOUT)
        seconds = round(self.waiter.monotonic() - start, 3)
        if status != self.ready_status:
            raise ServiceError("%s runs (pid %d) but is not ready: %s answered %s, not HTTP %d (one request: nothing "
                               "changed, so no wait). %s"
                               % (self.name, pid, self.ready_url, observed({"status": status, "error": error}),
                                  self.ready_status, log_tail(self.log)), ready_seconds=None)
        return seconds

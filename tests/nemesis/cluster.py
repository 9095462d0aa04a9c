"""The nemesis harness's test hosts: network namespaces joined by veth
pairs to one bridge (in a namespace of its own), a MariaDB (or a 3-node
Galera cluster) in its own namespaces, 3 idemfcgi instances, lighttpd in
front of them.  Nothing here touches the host's interfaces or routes: every
link lives inside namespaces this run created, on 10.213.T.0/24, and
teardown() removes them all (namespaces, their veths and nft tables go with
them) and every process started.
"""
import os
import shutil
import signal
import subprocess
import time

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def sh(*argv, check=True, quiet=False, env=None, timeout=120):
    """Runs argv; returns its stdout (text).  Raises on failure if check."""
    r = subprocess.run(list(argv), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                                 r.stderr.strip()[-2000:]))
    return r.stdout


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Cluster:
    """One run's hosts.  topology: "single" (one MariaDB), "galera",
    "postgres" (one PostgreSQL and its standby) or "redis" (a Redis master
    and its replica, durability = replicas)."""

    def __init__(self, builddir, srcdir, workdir, topology, tag):
        self.builddir, self.srcdir = builddir, srcdir
        self.dir, self.topology, self.tag = workdir, topology, tag
        self.net = "10.213.%d" % tag
        self.ns = {}            # role -> namespace name
        self.ip = {}            # role -> address
        self.procs = {}         # role -> Popen (idemfcgi masters, lighttpd)
        self.skew_files = {}
        self.dbs = {"galera": ["d1", "d2", "d3"], "postgres": ["d1", "d2"],
                    "redis": ["d1", "d2"]}.get(topology, ["db"])
        # postgres: d1 the primary, d2 its synchronous standby, until a
        # promotion swaps them; redis: d1 the master, d2 its replica
        self.primary = self.dbs[0]
        self.insts = ["i1", "i2", "i3"]
        self.dbport = {}
        # --sabotage: payments without recovery points, so that the
        # checker is shown to catch the second charges that follow
        self.recovery = True
        # --payments-two-phase: [payments] transactional = false
        self.pay_tx = True
        # --sabotage-ledger: [ledger] transactional = false
        self.ledger_tx = True
        self.ctl_env = dict(os.environ, IDEM_SRCDIR=srcdir)
        if topology == "galera":
            self.ctl_env["IDEM_GALERA_ADDRS"] = " ".join(
                "%s.%d" % (self.net, 21 + i) for i in range(3))
            self.ctl_env["IDEM_GALERA_NETNS"] = " ".join(
                "nm%d-d%d" % (tag, i + 1) for i in range(3))

    # ------------------------------------------------------------ network
    def net_up(self):
        """The hub with its bridge, and one namespace per host on it."""
        hub = "nm%d-hub" % self.tag
        sh("ip", "netns", "add", hub)
        self.ns["hub"] = hub
        sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", hub, "link", "set", "br0", "up")
        hosts = [("web", 2)] + [(r, 11 + i) for i, r in enumerate(self.insts)]
        hosts += [(r, 21 + i) for i, r in enumerate(self.dbs)]
        for role, last in hosts:
            ns = "nm%d-%s" % (self.tag, role)
            sh("ip", "netns", "add", ns)
            self.ns[role] = ns
            self.ip[role] = "%s.%d" % (self.net, last)
            sh("ip", "-n", hub, "link", "add", "v" + role, "type", "veth",
               "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", hub, "link", "set", "v" + role, "master", "br0",
               "up")
            sh("ip", "-n", ns, "addr", "add", self.ip[role] + "/24", "dev",
               "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def pids_in(self, role):
        """Every process in role's namespace."""
        out = sh("ip", "netns", "pids", self.ns[role], check=False)
        return [int(p) for p in out.split()]

    # ----------------------------------------------------------- database
    def db_dir(self, role=None):
        # its name names the socket (/tmp/idemfcgi-mdb-NAME.sock, or
        # /tmp/idemfcgi-pg-NAME): one a run; on postgres one a node, the
        # primary's by default
        if self.topology in ("postgres", "redis"):
            return os.path.join(self.dir, "nm%d-%s" % (self.tag,
                                                       role or self.primary))
        return os.path.join(self.dir, "nm%d-db" % self.tag)

    def db_sql(self, sql, node=1):
        """Rows (lists of strings) of sql as root (postgres) on database
        idem."""
        lib = os.path.join(self.srcdir, "tests", "lib")
        if self.topology == "postgres":
            out = sh(os.path.join(lib, "postgres-ctl"), "sql", self.db_dir(),
                     sql, env=self.ctl_env)
        elif self.topology == "galera":
            out = sh(os.path.join(lib, "galera-ctl"), "sql", self.db_dir(),
                     str(node), sql, env=self.ctl_env)
        else:
            out = sh(os.path.join(lib, "mariadb-ctl"), "sql", self.db_dir(),
                     sql, env=self.ctl_env)
        return [l.split("\t") for l in out.splitlines() if l]

    def db_start(self):
        """The database (or the cluster), and a user for the instances'
        subnet."""
        lib = os.path.join(self.srcdir, "tests", "lib")
        if self.topology == "redis":
            for r in self.dbs:
                self.dbport[r] = 6379
            self.rd_start("d1")
            self.rd_replica("d2")
            return
        if self.topology == "postgres":
            self.pg_start("d1")
            for r in self.dbs:
                self.dbport[r] = 5432
            # the instances' subnet, with the password as from 127.0.0.1,
            # and the standby's replication (copied to it with the data)
            hba = os.path.join(self.db_dir("d1"), "data", "pg_hba.conf")
            with open(hba, "a") as f:
                f.write("host replication all %s.0/24 trust\n"
                        "host all all %s.0/24 scram-sha-256\n"
                        % (self.net, self.net))
            self.db_sql("SELECT pg_reload_conf()")
            self.pg_standby("d2")
            # the instances' copy: a node made a standby again rewrites
            # its own, which an instance starting then would miss
            shutil.copy(os.path.join(self.db_dir("d1"), "password"),
                        os.path.join(self.dir, "pg-password"))
            return
        if self.topology == "galera":
            sh(os.path.join(lib, "galera-ctl"), "start", self.db_dir(),
               "13306", env=self.ctl_env, timeout=240)
            for i, r in enumerate(self.dbs):
                self.dbport[r] = 13306 + 4 * i
        else:
            self.db_single_start()
            self.dbport["db"] = 3306
        pw = open(os.path.join(self.db_dir(), "password")).read().strip()
        who = "'idem'@'%s.%%'" % self.net
        self.db_sql("CREATE USER IF NOT EXISTS %s IDENTIFIED BY '%s'; "
                    "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON idem.* "
                    "TO %s" % (who, pw, who))

    def rd_ctl(self, role, *args, env=None, timeout=60):
        """redis-ctl ARGS in role's namespace."""
        return sh("ip", "netns", "exec", self.ns[role],
                  os.path.join(self.srcdir, "tests", "lib", "redis-ctl"),
                  *args, env=env or self.ctl_env, timeout=timeout)

    def rd_start(self, role):
        """Redis on role's address (and its own loopback, for redis-ctl),
        as the master; its AOF (everysec) kept across a kill."""
        self.rd_ctl(role, "start", self.db_dir(role), "6379", "--bind",
                    "%s 127.0.0.1" % self.ip[role])

    def rd_replica(self, role):
        """Starts role as a replica of the master (a full sync replaces its
        data), and waits until it has synced."""
        env = dict(self.ctl_env, IDEM_REDIS_PRIMARY_HOST=self.ip[
            self.primary])
        self.rd_ctl(role, "replica", self.db_dir(role),
                    self.db_dir(self.primary), "6379", "--bind",
                    "%s 127.0.0.1" % self.ip[role], env=env)

    def rd_promote(self):
        """Kills the master and promotes its replica (REPLICAOF NO ONE, as
        Sentinel or an operator would), which the instances find by ROLE.
        Returns the old master, to be made the new one's replica."""
        old = self.primary
        new = [r for r in self.dbs if r != old][0]
        self.db_kill(old)
        self.rd_ctl(new, "promote", self.db_dir(new))
        self.primary = new
        return old

    def rd_synced(self):
        """Whether the master has its replica connected."""
        try:
            out = self.rd_ctl(self.primary, "cli", self.db_dir(),
                              "INFO", "replication", timeout=10)
        except Exception:
            return False
        return "connected_slaves:1" in out

    def pg_ctl(self, role, *args, env=None, timeout=120):
        """postgres-ctl ARGS in role's namespace."""
        return sh("ip", "netns", "exec", self.ns[role],
                  os.path.join(self.srcdir, "tests", "lib", "postgres-ctl"),
                  *args, env=env or self.ctl_env, timeout=timeout)

    def pg_start(self, role):
        """PostgreSQL node role (installed the first time; a standby stays
        one) on its address."""
        self.pg_ctl(role, "start", self.db_dir(role), "5432", "-c",
                    "listen_addresses=" + self.ip[role])

    def pg_standby(self, role):
        """Makes node role (its old data dropped) a streaming standby of
        the primary, and the primary wait for it at every commit
        (synchronous replication: what a promotion takes over has every
        commit a client was told of)."""
        env = dict(self.ctl_env, IDEM_PG_PRIMARY_HOST=self.ip[self.primary])
        self.pg_ctl(role, "standby", self.db_dir(role),
                    self.db_dir(self.primary), "5432", "-c",
                    "listen_addresses=" + self.ip[role], env=env)
        self.db_sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        self.db_sql("SELECT pg_reload_conf()")

    def pg_promote(self):
        """Kills the primary and promotes its standby, which the instances
        find by target_session_attrs=read-write.  Returns the old primary,
        to be made the new one's standby."""
        old = self.primary
        new = [r for r in self.dbs if r != old][0]
        self.db_kill(old)
        self.pg_ctl(new, "promote", self.db_dir(new))
        self.primary = new
        return old

    def pg_synced(self):
        """Whether the primary has its standby streaming, synchronous."""
        try:
            rows = self.db_sql("SELECT count(*) FROM pg_stat_replication "
                               "WHERE state = 'streaming' AND sync_state = "
                               "'sync'")
        except Exception:
            return False
        return rows == [["1"]]

    def db_single_start(self):
        sh("ip", "netns", "exec", self.ns["db"],
           os.path.join(self.srcdir, "tests", "lib", "mariadb-ctl"), "start",
           self.db_dir(), "3306", "--bind-address=" + self.ip["db"],
           env=self.ctl_env, timeout=120)

    def db_pid(self, role):
        """The mariadbd (postmaster) of db host role, or 0."""
        if self.topology in ("postgres", "redis"):
            f = os.path.join(self.db_dir(role), "pid")
        elif self.topology == "galera":
            d = os.path.join(self.db_dir(), "nm%d-db-%s" % (self.tag, role[1]))
            f = os.path.join(d, "pid")
        else:
            f = os.path.join(self.db_dir(), "pid")
        try:
            return int(open(f).read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def db_pids(self, role):
        """Every process of db host role's server (PostgreSQL's are many:
        its postmaster and each backend)."""
        if self.topology == "postgres":
            return self.pids_in(role)
        pid = self.db_pid(role)
        return [pid] if pid else []

    def db_kill(self, role):
        lib = os.path.join(self.srcdir, "tests", "lib")
        if self.topology == "redis":
            sh(os.path.join(lib, "redis-ctl"), "kill", self.db_dir(role),
               env=self.ctl_env)
        elif self.topology == "postgres":
            sh(os.path.join(lib, "postgres-ctl"), "kill", self.db_dir(role),
               env=self.ctl_env)
        elif self.topology == "galera":
            sh(os.path.join(lib, "galera-ctl"), "kill-node", self.db_dir(),
               role[1], env=self.ctl_env)
        else:
            sh(os.path.join(lib, "mariadb-ctl"), "kill", self.db_dir(),
               env=self.ctl_env)

    def db_restart(self, role):
        """Starts db host role again after a kill (a Galera node joins)."""
        lib = os.path.join(self.srcdir, "tests", "lib")
        if self.topology == "redis":
            # the master from its AOF; the replica synced again
            if role == self.primary:
                self.rd_start(role)
            else:
                self.rd_replica(role)
        elif self.topology == "postgres":
            self.pg_start(role)
        elif self.topology == "galera":
            sh(os.path.join(lib, "galera-ctl"), "start-node", self.db_dir(),
               role[1], env=self.ctl_env, timeout=120)
        else:
            self.db_single_start()

    def db_stop(self):
        lib = os.path.join(self.srcdir, "tests", "lib")
        if self.topology == "redis":
            for r in self.dbs:
                pid = self.db_pid(r)
                if pid:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except OSError:
                        pass
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            return
        if self.topology == "postgres":
            for r in self.dbs:
                if not os.path.exists(os.path.join(self.db_dir(r), "pid")):
                    continue
                for pid in self.db_pids(r):
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except OSError:
                        pass
                sh(os.path.join(lib, "postgres-ctl"), "stop", self.db_dir(r),
                   env=self.ctl_env, check=False, timeout=60)
            return
        if not os.path.exists(os.path.join(self.db_dir(), "password")):
            return
        if self.topology == "galera":
            for r in self.dbs:
                pid = self.db_pid(r)
                if pid:
                    os.kill(pid, signal.SIGCONT)
            sh(os.path.join(lib, "galera-ctl"), "stop", self.db_dir(),
               env=self.ctl_env, check=False, timeout=120)
        else:
            pid = self.db_pid("db")
            if pid:
                os.kill(pid, signal.SIGCONT)
            sh(os.path.join(lib, "mariadb-ctl"), "stop", self.db_dir(),
               env=self.ctl_env, check=False, timeout=60)

    def galera_size(self):
        """The largest cluster a node reports (0: none answers)."""
        out = sh(os.path.join(self.srcdir, "tests", "lib", "galera-ctl"),
                 "status", self.db_dir(), env=self.ctl_env, check=False)
        for l in out.splitlines():
            if l.startswith("size "):
                return int(l.split()[1])
        return 0

    # ---------------------------------------------------------- instances
    def write_instance_conf(self, role, secret, testkit_log, provider_url):
        i = self.insts.index(role)
        store, section = "mysql", "mysql"
        if self.topology == "galera":
            order = self.dbs[i:] + self.dbs[:i]
            hosts = " ".join("%s:%d" % (self.ip[r], self.dbport[r])
                             for r in order)
            extra = "causal-reads = true\n"
        elif self.topology == "postgres":
            # the failover list: a connection opens on whichever of them
            # takes writes (the primary, or the standby once promoted)
            store, section = "postgres", "postgres"
            hosts = " ".join("%s:5432" % self.ip[r] for r in self.dbs)
            extra = ""
        elif self.topology == "redis":
            # the master and its replica: connections stay on whichever
            # answers ROLE as a master; a reservation waits for the
            # replica (WAIT) before its handler runs
            store, section = "redis", "redis"
            hosts = " ".join("%s:6379" % self.ip[r] for r in self.dbs)
            extra = "durability = replicas\ndurability-timeout = 500ms\n"
        else:
            hosts = "%s:3306" % self.ip["db"]
            extra = ""
        b = self.builddir
        conf = os.path.join(self.dir, role + ".conf")
        with open(conf, "w") as f:
            f.write(
                "[server]\nlisten = %s:9000\nallow-clients = %s\n"
                "workers = 2\nthreads = 8\nshutdown-grace = 5s\n"
                "mount = /api\nready-path = /ready\n"
                "plugins = %s/tests/testkit/.libs/testkit.so\n"
                "    %s/.libs/ledger.so\n    %s/.libs/payments.so\n"
                "[idempotency]\nstore = %s\ninflight-ttl = 3s\n"
                "key-secret-file = %s\n"
                "[%s]\nhost = %s\n%spool-size = 16\nconnect-timeout = 2s\n"
                "read-timeout = 2s\nwrite-timeout = 2s\n%s"
                "[metrics]\nallow = %s 127.0.0.1\n"
                "[testkit]\nlog = %s\n"
                "[ledger]\ntransactional = %s\n"
                "[payments]\nprovider-url = %s\nprovider-timeout = 700ms\n"
                "recovery = %s\ntransactional = %s\n"
                % (self.ip[role], self.ip["web"], b, b, b, store, secret,
                   section, hosts,
                   "" if self.topology == "redis" else
                   "user = idem\npassword-file = %s\ndatabase = idem\n" % (
                       os.path.join(self.dir, "pg-password")
                       if self.topology == "postgres" else
                       os.path.join(self.db_dir(), "password")), extra,
                   self.ip["web"], testkit_log,
                   "true" if self.ledger_tx else "false", provider_url,
                   "true" if self.recovery else "false",
                   "true" if self.pay_tx else "false"))
        return conf

    def inst_start(self, role):
        """Starts idemfcgi in role's namespace, its clock under libfaketime
        (an offset file the skew nemesis rewrites; the monotonic clock is
        left alone, as a real clock step leaves it).  libfaketime 0.9.10
        with FAKETIME_DONT_FAKE_MONOTONIC makes a timed wait on a
        CLOCK_MONOTONIC condition variable return at once unless
        FAKETIME_FORCE_MONOTONIC_FIX=0: without it every worker's stop,
        lease round and health check ran without waiting."""
        skew = os.path.join(self.dir, role + ".faketime")
        if role not in self.skew_files:
            with open(skew, "w") as f:
                f.write("+0\n")
            self.skew_files[role] = skew
        env = dict(os.environ, IDEMFCGI_TEST_FAULTS="1")
        if os.path.exists(LIBFAKETIME):
            env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME_TIMESTAMP_FILE=skew,
                       FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1",
                       FAKETIME_FORCE_MONOTONIC_FIX="0")
        log = open(os.path.join(self.dir, role + ".log"), "a")
        self.procs[role] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[role],
             os.path.join(self.builddir, "idemfcgi"), "-c",
             os.path.join(self.dir, role + ".conf")],
            stdout=log, stderr=log, env=env, start_new_session=True)
        log.close()

    def inst_master(self, role):
        p = self.procs.get(role)
        return p.pid if p is not None and p.poll() is None else 0

    def inst_workers(self, role):
        m = self.inst_master(role)
        if not m:
            return []
        try:
            with open("/proc/%d/task/%d/children" % (m, m)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def inst_kill(self, role):
        """SIGKILL to every process of the instance."""
        for pid in self.pids_in(role):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        p = self.procs.get(role)
        if p is not None:
            p.wait()

    def inst_stop(self, role):
        p = self.procs.get(role)
        if p is None or p.poll() is not None:
            return
        for pid in self.pids_in(role):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.inst_kill(role)

    # ---------------------------------------------------------- web server
    def web_start(self, provider_conf):
        """lighttpd in the web namespace on a unix socket the clients use
        from outside, balancing /api over the instances; /prov is the
        payment provider (an idemfcgi of its own, memory store, in the web
        namespace)."""
        d = self.dir
        self.http_sock = os.path.join(d, "http.sock")
        pconf = os.path.join(d, "provider.conf")
        with open(pconf, "w") as f:
            f.write("[server]\nlisten = unix:%s/provider.sock\n"
                    "socket-mode = 0666\nthreads = 8\nmount = /prov\n"
                    "plugins = %s/tests/plugins/.libs/provider.so\n"
                    "[idempotency]\nstore = memory\n%s"
                    % (d, self.builddir, provider_conf))
        log = open(os.path.join(d, "provider.log.err"), "a")
        self.procs["provider"] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns["web"],
             os.path.join(self.builddir, "idemfcgi"), "-c", pconf],
            stdout=log, stderr=log, start_new_session=True)
        hosts = ",\n".join(
            '    ("host" => "%s", "port" => 9000, "check-local" => '
            '"disable", "connect-timeout" => 2, "read-timeout" => 20, '
            '"disable-time" => 1)' % self.ip[r] for r in self.insts)
        wconf = os.path.join(d, "lighttpd.conf")
        with open(wconf, "w") as f:
            f.write('server.modules = ("mod_fastcgi")\n'
                    'server.document-root = "%s"\n'
                    'server.bind = "%s"\n'
                    'server.pid-file = "%s/lighttpd.pid"\n'
                    'server.errorlog = "%s/lighttpd.err"\n'
                    'server.max-connections = 512\n'
                    'server.port = 8080\n'
                    '$SERVER["socket"] == "%s:8080" { }\n'
                    'fastcgi.balance = "round-robin"\n'
                    'fastcgi.server = ("/api" => (\n%s),\n'
                    '  "/prov" => (("socket" => "%s/provider.sock", '
                    '"check-local" => "disable")))\n'
                    % (d, self.http_sock, d, d, self.ip["web"], hosts, d))
        log = open(os.path.join(d, "lighttpd.out"), "a")
        self.procs["web"] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns["web"], "lighttpd", "-D", "-f",
             wconf], stdout=log, stderr=log, start_new_session=True)
        for _ in range(200):
            if os.path.exists(self.http_sock) and \
                    os.path.exists(os.path.join(d, "provider.sock")):
                return
            time.sleep(0.05)
        raise RuntimeError("lighttpd or the provider did not start")

    # ------------------------------------------------------------ teardown
    def teardown(self):
        """Stops every process this run started and deletes every
        namespace (with its veth and nft tables).  Never raises."""
        for role in list(self.procs):
            try:
                if role in self.insts:
                    self.inst_stop(role)
                else:
                    p = self.procs[role]
                    if p.poll() is None:
                        p.terminate()
                        p.wait(timeout=10)
            except Exception:
                pass
        for role in list(self.ns):
            if role in self.dbs or role == "hub":
                continue
            for pid in self.pids_in(role):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            self.db_stop()
        except Exception:
            pass
        for role in self.dbs:
            if role in self.ns:
                for pid in self.pids_in(role):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        for role, ns in list(self.ns.items()):
            sh("ip", "netns", "del", ns, check=False)
            del self.ns[role]

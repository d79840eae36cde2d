//! A MariaDB server of the test's own (`mariadb-install-db` and `mariadbd` on a temporary data
//! directory and a free port), which the test kills and starts again: the database going away
//! for real, as a crash or a restart does. Never the shared server of the other suites.
//!
//! The server runs as root (`--user=root`) without grant tables (any user is let in: it listens
//! on 127.0.0.1 only and lives as long as the test), with database `idem`; it is killed and its
//! directory deleted on drop.

use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a start may take before the test gives up.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A private MariaDB server; see the module docs.
#[derive(Debug)]
pub struct PrivateMariaDb {
    dir: TempDir,
    port: u16,
    server: Mutex<Option<Child>>,
}

impl PrivateMariaDb {
    /// Creates the data directory, starts the server and creates database `idem`.
    ///
    /// # Panics
    /// When MariaDB's programs are not installed, or the server cannot be created or started:
    /// the test cannot go on without it.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        run(Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .args(["--user=root", "--skip-test-db"]));
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free local port")
            .port();
        let server = Self {
            dir,
            port,
            server: Mutex::new(None),
        };
        server.start_again();
        run(server.client().args(["-e", "CREATE DATABASE idem"]));
        server
    }

    /// The URL of its database `idem`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/idem", self.port)
    }

    /// Kills it (SIGKILL: open connections are cut, nothing is flushed) and waits until it has
    /// exited: from then on connections are refused. The next start recovers from InnoDB's log.
    ///
    /// # Panics
    /// When the server is not running.
    pub fn kill(&self) {
        let mut server = self.server.lock().expect("not poisoned");
        let mut child = server.take().expect("the server is running");
        child.kill().expect("kill mariadbd");
        child.wait().expect("wait for mariadbd");
    }

    /// Starts it (again), waiting until it answers.
    ///
    /// # Panics
    /// When it does not answer within a minute.
    pub fn start_again(&self) {
        let data = self.dir.path().join("data");
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={}", self.port))
            .arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("pid").display()
            ))
            .arg(format!(
                "--log-error={}",
                self.dir.path().join("err.log").display()
            ))
            .args([
                "--user=root",
                "--bind-address=127.0.0.1",
                "--skip-grant-tables",
                "--innodb-buffer-pool-size=64M",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        *self.server.lock().expect("not poisoned") = Some(child);
        let started = Instant::now();
        loop {
            let ping = Command::new("mariadb-admin")
                .args(["--protocol=tcp", "-h127.0.0.1", "-uroot"])
                .arg(format!("-P{}", self.port))
                .arg("ping")
                .output()
                .expect("run mariadb-admin");
            if ping.status.success() {
                return;
            }
            assert!(
                started.elapsed() < START_LIMIT,
                "mariadbd did not answer within {START_LIMIT:?}; see {}",
                self.dir.path().join("err.log").display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The `mariadb` client, connected to it over TCP.
    fn client(&self) -> Command {
        let mut command = Command::new("mariadb");
        command
            .args(["--protocol=tcp", "-h127.0.0.1", "-uroot"])
            .arg(format!("-P{}", self.port));
        command
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        if let Ok(mut server) = self.server.lock()
            && let Some(mut child) = server.take()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn run(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

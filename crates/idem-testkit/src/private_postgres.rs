//! A PostgreSQL server of the test's own (`initdb` and `pg_ctl` on a free port), which the test
//! stops and starts again: the database going away for real, as a failover or a restart does.
//!
//! The cluster runs as the `postgres` system user (PostgreSQL refuses to run as root) in a
//! temporary directory, listening on 127.0.0.1 only; it is stopped and deleted on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

/// Where Debian and Ubuntu install the server's programs: `/usr/lib/postgresql/{major}/bin`.
const INSTALL_ROOT: &str = "/usr/lib/postgresql";

/// A private PostgreSQL cluster; see the module docs.
#[derive(Debug)]
pub struct PrivatePostgres {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// Creates the cluster (database `postgres`, user `postgres`, trust on 127.0.0.1) and starts it.
    ///
    /// # Panics
    /// When PostgreSQL's programs are not installed, the user `postgres` does not exist, or the
    /// cluster cannot be created or started: the test cannot go on without it.
    pub fn start() -> Self {
        let bin = server_bin();
        let dir = tempfile::tempdir().expect("create a temporary directory");
        run(Command::new("chown").arg("postgres").arg(dir.path()));
        let data = dir.path().join("data");
        run(as_postgres(&bin.join("initdb"))
            .args(["--auth=trust", "--username=postgres", "--no-sync", "-D"])
            .arg(&data));
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free local port")
            .port();
        let server = Self { dir, bin, port };
        server.start_again();
        server
    }

    /// The URL of its database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops it as `pg_ctl stop -m fast` does (open connections are closed), waiting until it
    /// has exited: from then on connections are refused.
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn stop(&self) {
        run(as_postgres(&self.bin.join("pg_ctl"))
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(self.data()));
    }

    /// Starts it (again), waiting until it accepts connections.
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        run(as_postgres(&self.bin.join("pg_ctl"))
            .args(["start", "-w", "-s", "-l"])
            .arg(self.dir.path().join("log"))
            .arg("-o")
            .arg(options)
            .arg("-D")
            .arg(self.data()));
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .args(["stop", "-m", "immediate", "-w", "-D"])
            .arg(self.data())
            .output();
    }
}

/// The newest installed server's `bin` directory.
fn server_bin() -> PathBuf {
    let mut majors: Vec<u32> = std::fs::read_dir(INSTALL_ROOT)
        .unwrap_or_else(|e| panic!("PostgreSQL's programs under {INSTALL_ROOT}: {e}"))
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    majors.sort_unstable();
    let major = majors
        .last()
        .unwrap_or_else(|| panic!("no PostgreSQL version under {INSTALL_ROOT}"));
    Path::new(INSTALL_ROOT).join(major.to_string()).join("bin")
}

/// `program` run as the `postgres` user.
fn as_postgres(program: &Path) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(program);
    command
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

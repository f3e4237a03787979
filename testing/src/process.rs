//! A child process whose output goes to a log file and which is killed (by pid) when
//! dropped, also while a failing test unwinds.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::HarnessError;

/// A running child process.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
}

impl Process {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Process, HarnessError> {
        let io = |e| HarnessError::Io(format!("failed to open {}", log.display()), e);
        let out = File::options().create(true).append(true).open(log).map_err(io)?;
        let err = out.try_clone().map_err(io)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd.spawn().map_err(|e| HarnessError::Io(format!("failed to start {name}"), e))?;
        Ok(Process { name: name.to_string(), child, log: log.to_path_buf(), exited: None })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The name given at start.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends a signal; a process that already exited is left alone.
    pub fn signal(&mut self, signal: Signal) {
        if self.poll().is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// The exit status if the process has exited.
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Waits up to `timeout` for the process to exit.
    pub async fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.poll() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL, then reaps the process.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        if self.exited.is_none() {
            self.exited = self.child.wait().ok();
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.signal(Signal::SIGTERM);
        if self.wait_timeout(grace).await.is_none() {
            self.kill();
        }
        self.exited
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- last lines of {} ({}) ---\n{}", self.name, self.log.display(), self.log_tail(40));
        }
    }
}

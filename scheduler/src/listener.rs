//! A TCP listener that holds at most a fixed number of connections open.
//!
//! When the limit is reached the listener stops accepting: further clients wait in the
//! kernel's accept backlog, holding no file descriptor and no memory of this process,
//! and are taken as soon as an open connection closes.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::{AddrListener, Address};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections held open at once when nothing else is configured.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The listening address of a [`LimitedListener`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitedAddr(pub SocketAddr);

impl Address for LimitedAddr {
    type Stream = LimitedStream;
    type Listener = LimitedListener;
}

/// A TCP listener that accepts only while fewer than its limit of connections are open.
#[derive(Debug)]
pub struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    /// Whether the limit was reached and not left since: logged once each time.
    full: std::sync::atomic::AtomicBool,
}

impl LimitedListener {
    /// Binds `addr`, to hold at most `max_connections` (at least one) connections open.
    pub async fn bind(addr: SocketAddr, max_connections: usize) -> io::Result<Self> {
        let inner = TcpListener::bind(addr).await?;
        Ok(Self { inner, permits: Arc::new(Semaphore::new(max_connections.max(1))), full: Default::default() })
    }
}

impl AddrListener<LimitedStream, LimitedAddr> for LimitedListener {
    async fn bind_to(addr: LimitedAddr) -> io::Result<Self> {
        Self::bind(addr.0, DEFAULT_MAX_CONNECTIONS).await
    }

    async fn accept_stream(&self) -> io::Result<(LimitedStream, LimitedAddr)> {
        use std::sync::atomic::Ordering;
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => {
                self.full.store(false, Ordering::Relaxed);
                p
            }
            Err(_) => {
                if !self.full.swap(true, Ordering::Relaxed) {
                    tracing::warn!("connection limit reached: new connections wait until an open one closes");
                }
                self.permits.clone().acquire_owned().await.map_err(io::Error::other)?
            }
        };
        let (stream, addr) = self.inner.accept().await?;
        Ok((LimitedStream { inner: stream, _permit: permit }, LimitedAddr(addr)))
    }

    fn get_local_addr(&self) -> io::Result<LimitedAddr> {
        self.inner.local_addr().map(LimitedAddr)
    }
}

/// An accepted connection; its slot is freed when it is dropped.
#[derive(Debug)]
pub struct LimitedStream {
    inner: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for LimitedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

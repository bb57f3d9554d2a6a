//! Guest stdout/stderr: captured into bounded buffers that keep the newest
//! bytes, so a panic message survives however much the guest wrote before it.
//!
//! Writes land synchronously (no background task), so what a guest wrote just
//! before trapping is always in the tail.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// The newest `capacity` bytes a guest wrote to one stream.
#[derive(Debug, Clone)]
pub(crate) struct OutputTail {
    inner: Arc<Mutex<Tail>>,
}

#[derive(Debug)]
struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
}

impl OutputTail {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Tail {
                bytes: VecDeque::with_capacity(capacity.min(4096)),
                capacity,
            })),
        }
    }

    fn append(&self, data: &[u8]) {
        let mut tail = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let capacity = tail.capacity;
        let data = &data[data.len().saturating_sub(capacity)..];
        let overflow = (tail.bytes.len() + data.len()).saturating_sub(capacity);
        tail.bytes.drain(..overflow);
        tail.bytes.extend(data);
    }

    /// The captured bytes as (lossy) UTF-8.
    pub(crate) fn contents(&self) -> String {
        let tail = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = tail.bytes.as_slices();
        let mut bytes = Vec::with_capacity(front.len() + back.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl IsTerminal for OutputTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputTail {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for OutputTail {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always writable: old bytes make room.
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for OutputTail {
    async fn ready(&mut self) {}
}

impl AsyncWrite for OutputTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_bytes() {
        let tail = OutputTail::new(8);
        tail.append(b"hello ");
        tail.append(b"world");
        assert_eq!(tail.contents(), "lo world");
        tail.append(b"0123456789");
        assert_eq!(tail.contents(), "23456789");
    }
}

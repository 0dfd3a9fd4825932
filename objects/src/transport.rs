//! A connection's byte stream: a TCP socket, plain or under TLS (rustls),
//! read through one buffer; and the wait, on a plain socket, for as many
//! bytes as an answer is sure to hold, in one wake-up (see `connection`).

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// The read buffer: a small answer's status, headers and body in one read.
const BUFFER: usize = 64 << 10;
/// The most bytes a rank waits for at once with the low-water mark: a
/// small answer's rest. Larger chunks are read as they come (each read
/// then moves many bytes). Kept well below the receive buffer, whose
/// window a larger mark could narrow.
pub const WAIT_WHOLE: usize = 16 << 10;

/// Where a connection goes: `host[:port]` as the endpoint names it, and
/// whether under TLS.
#[derive(Debug, Clone)]
pub struct Peer {
    pub authority: String,
    /// For an `https://` endpoint: the TLS settings and the name its
    /// certificate must carry.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

impl Peer {
    /// Opens a connection, resolving the name at each connect (a name may
    /// move).
    pub fn connect(&self) -> io::Result<Stream> {
        let has_port = match self.authority.strip_prefix('[') {
            Some(v6) => v6.contains("]:"),
            None => self.authority.contains(':'),
        };
        let default_port = if self.tls.is_some() { 443 } else { 80 };
        let addrs: Vec<SocketAddr> = if has_port {
            self.authority.to_socket_addrs()?.collect()
        } else {
            (self.authority.trim_matches(['[', ']']), default_port)
                .to_socket_addrs()?
                .collect()
        };
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.connect_timeout) {
                Ok(s) => {
                    // Requests are written whole; Nagle's wait for an ACK
                    // would only delay them.
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(self.timeout))?;
                    s.set_write_timeout(Some(self.timeout))?;
                    let socket = Socket { tcp: s, mark: 1 };
                    let transport = match &self.tls {
                        None => Transport::Plain(socket),
                        Some((config, name)) => {
                            let tls = ClientConnection::new(config.clone(), name.clone())
                                .map_err(io::Error::other)?;
                            Transport::Tls(Box::new(StreamOwned::new(tls, socket)))
                        }
                    };
                    return Ok(BufReader::with_capacity(BUFFER, transport));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// TLS settings trusting the system's roots and, where `AWS_CA_BUNDLE`
/// names one, the certificates of that file (as the AWS CLI does).
pub fn tls_config() -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    // Roots the system store holds but rustls cannot read are skipped, as
    // other clients skip them.
    let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(bundle) = std::env::var_os("AWS_CA_BUNDLE").filter(|b| !b.is_empty()) {
        let certs = CertificateDer::pem_file_iter(&bundle)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("AWS_CA_BUNDLE {}: {e}", bundle.to_string_lossy()))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(format!(
                "AWS_CA_BUNDLE {}: no certificate in it",
                bundle.to_string_lossy()
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS settings: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

pub type Stream = BufReader<Transport>;

#[derive(Debug)]
pub enum Transport {
    Plain(Socket),
    Tls(Box<StreamOwned<ClientConnection, Socket>>),
}

impl Transport {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => &s.tcp,
            Transport::Tls(t) => &t.sock.tcp,
        }
    }

    /// The low-water mark the socket has now.
    #[cfg(test)]
    pub fn mark(&self) -> i32 {
        match self {
            Transport::Plain(s) => s.mark,
            Transport::Tls(t) => t.sock.mark,
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.tcp.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.tcp.flush(),
            Transport::Tls(t) => t.flush(),
        }
    }
}

/// A connection's socket, with the low-water mark its last wait left set.
/// Answers to a storm's requests are alike, so the next wait mostly wants
/// the same mark: it is set again only when it changes (two system calls a
/// request saved), and a read while it is above a byte takes what is here
/// without waiting (a blocking read could sleep past what comes, see
/// `connection`), lowering it to a byte only if nothing is.
#[derive(Debug)]
pub struct Socket {
    pub tcp: TcpStream,
    /// The socket's `SO_RCVLOWAT`, as last set.
    mark: i32,
}

impl Socket {
    /// Sets how many bytes the socket holds before `poll` says it can be
    /// read.
    fn set_mark(&mut self, bytes: i32) -> io::Result<()> {
        if bytes == self.mark {
            return Ok(());
        }
        // rustix has no SO_RCVLOWAT.
        // SAFETY: the option's value is an int, passed with its size; the
        // descriptor is this open socket's.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&self.tcp),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&bytes as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.mark = bytes;
        Ok(())
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.mark > 1 {
            match rustix::net::recv(&self.tcp, &mut *buf, rustix::net::RecvFlags::DONTWAIT) {
                Ok((n, _)) => return Ok(n),
                Err(rustix::io::Errno::AGAIN) => self.set_mark(1)?,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.tcp.read(buf)
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// Sleeps until at least `need` bytes beyond those `stream` holds read are
/// here (or the connection ended, or `timeout` passed), with one wake-up
/// rather than one a piece. `need` must be no more than is sure to come.
pub fn wait_for(stream: &mut Stream, need: usize, timeout: Duration) -> io::Result<()> {
    if poll_for(stream, need, timeout)? {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no answer within the timeout",
        ))
    }
}

/// Sleeps until at least `need` bytes beyond those `stream` holds read are
/// here, or the connection ended (then true), or `timeout` passed (false).
/// Under TLS, at once: bytes already taken off the socket may wait
/// decrypted in the TLS state, where the socket's count cannot see them.
pub fn poll_for(stream: &mut Stream, need: usize, timeout: Duration) -> io::Result<bool> {
    let here = stream.buffer().len();
    if need <= here + 1 {
        // A plain read wakes at the first byte.
        return Ok(true);
    }
    let Transport::Plain(socket) = stream.get_mut() else {
        return Ok(true);
    };
    socket.set_mark((need - here).min(WAIT_WHOLE) as i32)?;
    let timeout = rustix::event::Timespec::try_from(timeout)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a timeout too long"))?;
    let fd = socket.tcp.as_fd();
    let mut polled = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let waited = loop {
        match rustix::event::poll(&mut polled, Some(&timeout)) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r,
        }
    };
    Ok(waited? > 0)
}

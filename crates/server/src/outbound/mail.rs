//! Outgoing e-mail over SMTP (password resets).

use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// An SMTP transport and the sender address; cheap to clone.
#[derive(Clone)]
pub struct Mailer {
    transport: Arc<AsyncSmtpTransport<Tokio1Executor>>,
    from: Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold SMTP credentials: never printed.
        f.debug_struct("Mailer")
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

impl Mailer {
    /// A mailer for `smtp://host:port`, `smtps://...` or `smtp://...?tls=required`, sending as `from`.
    pub fn new(url: &str, from: &str) -> anyhow::Result<Self> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|_| anyhow::anyhow!("SMTP_URL is not a valid smtp:// or smtps:// URL"))?
            .timeout(Some(Duration::from_secs(10)))
            .build();
        let from: Mailbox = from
            .parse()
            .map_err(|_| anyhow::anyhow!("SMTP_FROM is not a valid e-mail address: {from}"))?;
        Ok(Self {
            transport: Arc::new(transport),
            from,
        })
    }

    /// Sends an HTML e-mail to `to`; the error says why, without secrets.
    pub async fn send_html(&self, to: &str, subject: &str, html: String) -> Result<(), String> {
        let to: Mailbox = to.parse().map_err(|e| format!("recipient: {e}"))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_HTML)
            .body(html)
            .map_err(|e| format!("message: {e}"))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| format!("smtp: {e}"))
    }
}

//! What `ctxbox doctor` found: one [`Finding`] per check, a [`Report`] of them.

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As it should be.
    Ok,
    /// Worth knowing, but nothing is wrong (e.g. no Hermes configured).
    Note,
    /// Something to fix; the report fails.
    Problem,
}

impl Status {
    /// The word printed before the finding.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Note => "note",
            Self::Problem => "PROBLEM",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What part of the installation (`binary`, `data-dir`, `engine`, `openclaw`, `hermes`, `host`).
    pub area: &'static str,
    /// What in it (a file, an engine, a setting).
    pub subject: String,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How to fix it (problems and some notes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    /// A check that passed.
    pub fn ok(area: &'static str, subject: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            area,
            subject: subject.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    /// Something worth knowing; `fix` may be empty.
    pub fn note(
        area: &'static str,
        subject: impl Into<String>,
        detail: impl Into<String>,
        fix: &str,
    ) -> Self {
        Self {
            fix: (!fix.is_empty()).then(|| fix.to_owned()),
            status: Status::Note,
            ..Self::ok(area, subject, detail)
        }
    }

    /// A problem and its fix.
    pub fn problem(
        area: &'static str,
        subject: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            fix: Some(fix.into()),
            status: Status::Problem,
            ..Self::ok(area, subject, detail)
        }
    }
}

/// Every finding, and whether all is well.
#[derive(Debug, Serialize)]
pub struct Report {
    /// No finding is a problem.
    pub ok: bool,
    /// This binary's version.
    pub version: &'static str,
    /// In the order they were checked.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The report of `findings`.
    pub fn new(findings: Vec<Finding>) -> Self {
        Self {
            ok: findings
                .iter()
                .all(|finding| finding.status != Status::Problem),
            version: env!("CARGO_PKG_VERSION"),
            findings,
        }
    }

    /// How many findings are problems.
    pub fn problems(&self) -> usize {
        self.findings
            .iter()
            .filter(|finding| finding.status == Status::Problem)
            .count()
    }
}

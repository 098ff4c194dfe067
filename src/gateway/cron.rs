//! The cron ticker: runs `[[cron]]` jobs on their own task, beating its own heartbeat.

/// Parse a 5-field (or 6-field, with leading seconds) cron expression.
pub fn parse_schedule(schedule: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(schedule)
}

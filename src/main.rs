fn main() -> std::process::ExitCode {
    hermes_svc::cli::main()
}

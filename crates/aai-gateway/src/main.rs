//! The `aai-gateway` binary. Everything lives in the library.

fn main() -> std::process::ExitCode {
    aai_gateway::main()
}

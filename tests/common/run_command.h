// Runs a shell command as a user would (model-train, mpirun, a script), for the tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace lockstep::test {

struct CommandResult {
  int exit_code = -1;  // -1 when it could not start or did not exit normally
  std::string output;  // stdout and stderr together
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The last line of a command's output, without its line break: what a script that logs as it
// goes prints as its answer (a path).
inline std::string LastLine(std::string output) {
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const size_t line = output.rfind('\n');
  return line == std::string::npos ? output : output.substr(line + 1);
}

}  // namespace lockstep::test

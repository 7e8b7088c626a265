// doc.snippets: keeps the code in the markdown pages and the compiled doc programs identical.
//
// Every ```cpp block in README.md and docs/*.md must be preceded by a marker line
//   <!-- snippet: NAME -->
// and must equal, line for line, the region of a tests/docs/*.cpp file between
//   // [doc:NAME]   and   // [/doc:NAME]
// (with the region's common indentation removed). Every region must appear in some page.
// So an example cannot be in the docs without being compiled, run and checked.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

int failures = 0;

void fail(std::string const& where, std::string const& what) {
  std::fprintf(stderr, "%s: %s\n", where.c_str(), what.c_str());
  ++failures;
}

std::vector<std::string> read_lines(fs::path const& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string trim(std::string const& s) {
  auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// If line is exactly `<prefix>NAME<suffix>` (after trimming), returns NAME.
bool match(std::string const& line, std::string const& prefix, std::string const& suffix,
           std::string& name) {
  std::string t = trim(line);
  if (t.size() <= prefix.size() + suffix.size() || t.rfind(prefix, 0) != 0 ||
      t.compare(t.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  name = trim(t.substr(prefix.size(), t.size() - prefix.size() - suffix.size()));
  return !name.empty();
}

std::vector<std::string> dedent(std::vector<std::string> lines) {
  std::size_t common = std::string::npos;
  for (auto const& l : lines)
    if (!trim(l).empty()) common = std::min(common, l.find_first_not_of(' '));
  for (auto& l : lines) {
    l = l.size() >= common && common != std::string::npos ? l.substr(common) : trim(l);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
  }
  return lines;
}

struct region {
  std::string file;
  std::vector<std::string> lines;
};

}  // namespace

int main(int argc, char** argv) {
  fs::path root =
      argc > 1 ? fs::path(argv[1]) : fs::path(__FILE__).parent_path().parent_path().parent_path();
  if (!fs::exists(root / "README.md") || !fs::is_directory(root / "tests" / "docs")) {
    fail(root.string(), "not the zenith source tree (pass it as the first argument)");
    return 1;
  }

  // The regions of the compiled doc programs.
  std::map<std::string, region> regions;
  for (auto const& entry : fs::directory_iterator(root / "tests" / "docs")) {
    if (entry.path().extension() != ".cpp") continue;
    auto lines = read_lines(entry.path());
    std::string file = "tests/docs/" + entry.path().filename().string();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string name, end_name;
      if (!match(lines[i], "// [doc:", "]", name)) continue;
      std::size_t j = i + 1;
      std::vector<std::string> body;
      while (j < lines.size() && !(match(lines[j], "// [/doc:", "]", end_name)))
        body.push_back(lines[j++]);
      std::string where = file + ":" + std::to_string(i + 1);
      if (j == lines.size()) {
        fail(where, "region '" + name + "' has no // [/doc:" + name + "]");
      } else if (end_name != name) {
        fail(where, "region '" + name + "' closed by '" + end_name + "'");
      } else if (regions.count(name)) {
        fail(where, "region '" + name + "' also defined in " + regions[name].file);
      } else {
        regions[name] = {where, dedent(body)};
      }
      i = j;
    }
  }

  // The pages.
  std::vector<fs::path> pages{root / "README.md"};
  for (auto const& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  std::sort(pages.begin() + 1, pages.end());

  std::set<std::string> used;
  std::size_t blocks = 0;
  for (auto const& page : pages) {
    auto lines = read_lines(page);
    std::string file = fs::relative(page, root).string();
    std::string pending;  // the snippet marker just seen
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string t = trim(lines[i]), name;
      if (match(lines[i], "<!-- snippet:", "-->", name)) {
        pending = name;
        continue;
      }
      bool cpp_fence = t == "```cpp" || t == "```c++";
      std::string where = file + ":" + std::to_string(i + 1);
      if (!cpp_fence) {
        if (!t.empty()) pending.clear();
        continue;
      }
      ++blocks;
      std::vector<std::string> body;
      std::size_t j = i + 1;
      while (j < lines.size() && trim(lines[j]) != "```") body.push_back(lines[j++]);
      i = j;
      if (pending.empty()) {
        fail(where, "```cpp block without a <!-- snippet: NAME --> marker line before it");
        continue;
      }
      used.insert(pending);
      auto it = regions.find(pending);
      if (it == regions.end()) {
        fail(where, "snippet '" + pending + "' has no // [doc:" + pending + "] region");
        pending.clear();
        continue;
      }
      body = dedent(body);
      auto const& want = it->second.lines;
      if (body != want) {
        std::size_t k = 0;
        while (k < body.size() && k < want.size() && body[k] == want[k]) ++k;
        fail(where, "snippet '" + pending + "' differs from " + it->second.file + " at its line " +
                        std::to_string(k + 1) +
                        ":\n  page: " + (k < body.size() ? body[k] : "<end>") +
                        "\n  code: " + (k < want.size() ? want[k] : "<end>"));
      }
      pending.clear();
    }
  }
  for (auto const& [name, r] : regions)
    if (!used.count(name)) fail(r.file, "region '" + name + "' appears in no page");

  if (failures) {
    std::fprintf(stderr, "doc.snippets: %d problem(s)\n", failures);
    return 1;
  }
  std::printf("doc.snippets: %zu code blocks in %zu pages match %zu compiled regions\n", blocks,
              pages.size(), regions.size());
  return 0;
}

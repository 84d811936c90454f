#include "banyan/core/latency_matrix.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "banyan/core/types.hpp"

namespace banyan {

namespace {

std::string_view trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

/// The file's lines that carry content, with their 1-based line numbers: blank lines
/// and '#' comments left out.
std::vector<std::pair<std::size_t, std::string_view>> content_lines(std::string_view text) {
  std::vector<std::pair<std::size_t, std::string_view>> out;
  std::size_t number = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++number;
    auto t = trim(line);
    if (!t.empty() && t.front() != '#')
      out.emplace_back(number, t);
  }
  return out;
}

std::vector<std::string_view> split_cells(std::string_view line) {
  std::vector<std::string_view> cells;
  while (true) {
    auto comma = line.find(',');
    cells.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos)
      break;
    line = line.substr(comma + 1);
  }
  return cells;
}

/// Splits on commas and whitespace alike, dropping empty pieces.
std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  auto sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\r'; };
  while (i < line.size()) {
    while (i < line.size() && sep(line[i]))
      ++i;
    auto b = i;
    while (i < line.size() && !sep(line[i]))
      ++i;
    if (i > b)
      words.push_back(line.substr(b, i - b));
  }
  return words;
}

std::optional<double> as_number(std::string_view s) {
  if (s.empty())
    return std::nullopt;
  std::string str(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size())
    return std::nullopt;
  return v;
}

error at(std::size_t line, std::string what) {
  return make_error(errc::parse_error, "line " + std::to_string(line) + ": " + what);
}

error at(std::size_t line, std::size_t column, std::string what) {
  return make_error(errc::parse_error, "line " + std::to_string(line) + ", column " +
                                         std::to_string(column) + ": " + what);
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::not_found, "cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

expected<named_matrix> parse_matrix_csv(std::string_view text) {
  auto lines = content_lines(text);
  if (lines.empty())
    return make_error(errc::parse_error, "no data (an N x N matrix is expected)");
  named_matrix m;
  std::size_t first_data = 0;
  bool name_column = false;

  // Header: no cell is a number (an empty corner cell aside).
  auto head = split_cells(lines[0].second);
  bool is_header = true;
  for (std::size_t i = 0; i < head.size(); ++i)
    if (as_number(head[i]) && !(i == 0 && head[i].empty()))
      is_header = false;
  if (is_header && head.size() == 1 && head[0].empty())
    is_header = false;
  std::size_t n = 0;
  if (is_header) {
    first_data = 1;
    if (lines.size() < 2)
      return at(lines[0].first, "a header but no rows");
    auto first_row = split_cells(lines[1].second);
    name_column = head[0].empty() || !as_number(first_row[0]);
    // With a name column the header may or may not have a corner cell above it.
    std::size_t skip = name_column && (head[0].empty() || head.size() == first_row.size()) ? 1 : 0;
    for (std::size_t i = skip; i < head.size(); ++i) {
      if (head[i].empty())
        return at(lines[0].first, i + 1, "empty name");
      for (const auto& seen : m.names)
        if (seen == head[i])
          return at(lines[0].first, i + 1, "duplicate name " + quoted(head[i]));
      m.names.emplace_back(head[i]);
    }
    n = m.names.size();
  } else {
    n = head.size();
  }

  for (std::size_t r = first_data; r < lines.size(); ++r) {
    auto [line, content] = lines[r];
    auto row = r - first_data;
    if (row >= n)
      return at(line, "more rows than the " + std::to_string(n) +
                        " columns (the matrix must be square)");
    auto cells = split_cells(content);
    std::size_t offset = name_column ? 1 : 0;
    if (cells.size() != n + offset)
      return at(line, "expected " + std::to_string(n) + " values, found " +
                        std::to_string(cells.size() < offset ? 0 : cells.size() - offset));
    if (name_column && cells[0] != m.names[row])
      return at(line, 1, "row " + quoted(cells[0]) + " where column " +
                           std::to_string(row + 1) + " is " + quoted(m.names[row]) +
                           " (rows and columns must list processors in the same order)");
    std::vector<double> values;
    for (std::size_t c = offset; c < cells.size(); ++c) {
      if (cells[c].empty())
        return at(line, c + 1, "empty cell");
      auto v = as_number(cells[c]);
      if (!v)
        return at(line, c + 1, quoted(cells[c]) + " is not a number");
      if (!std::isfinite(*v))
        return at(line, c + 1, quoted(cells[c]) + " is not a finite number");
      if (*v < 0)
        return at(line, c + 1, "negative value " + std::string(cells[c]));
      values.push_back(*v);
    }
    m.values.push_back(std::move(values));
  }
  if (m.values.size() != n)
    return make_error(errc::parse_error,
                      std::to_string(n) + " columns but " + std::to_string(m.values.size()) +
                        " rows (the matrix must be square)");
  return m;
}

expected<named_matrix> load_matrix_csv(const std::string& path) {
  auto text = read_file(path);
  if (!text)
    return text.err();
  auto m = parse_matrix_csv(*text);
  if (!m)
    return make_error(m.err().code, path + ": " + m.err().message);
  return m;
}

expected<std::vector<std::vector<int>>> parse_clusters(std::string_view text, std::size_t n,
                                                       const std::vector<std::string>& names) {
  std::vector<std::vector<int>> groups(n);
  std::vector<std::size_t> listed_on(n, 0);
  std::vector<std::map<std::string, int, std::less<>>> ids; // per level: name -> number
  std::size_t levels = 0;
  bool first = true;
  for (auto [line, content] : content_lines(text)) {
    auto words = split_words(content);
    if (words.empty())
      return at(line, "no processor");
    // The processor: a name from the matrix, else an id.
    proc_id p = no_proc;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == words[0])
        p = static_cast<proc_id>(i);
    if (p == no_proc) {
      auto v = as_number(words[0]);
      if (!v || *v != std::floor(*v) || *v < 0)
        return at(line, "unknown processor " + quoted(words[0]));
      if (*v >= static_cast<double>(n))
        return at(line, "processor " + std::string(words[0]) + " out of range (" +
                          std::to_string(n) + " processors)");
      p = static_cast<proc_id>(*v);
    }
    if (listed_on[p] != 0)
      return at(line, "processor " + std::to_string(p) + " listed twice (first on line " +
                        std::to_string(listed_on[p]) + ")");
    listed_on[p] = line;
    auto found = words.size() - 1;
    if (first) {
      if (found == 0)
        return at(line, "no group for processor " + std::to_string(p));
      levels = found;
      ids.resize(levels);
      first = false;
    } else if (found != levels) {
      return at(line, "expected " + std::to_string(levels) + " groups, found " +
                        std::to_string(found));
    }
    for (std::size_t l = 0; l < levels; ++l) {
      auto it = ids[l].find(words[l + 1]);
      if (it == ids[l].end())
        it = ids[l].emplace(std::string(words[l + 1]), static_cast<int>(ids[l].size())).first;
      groups[p].push_back(it->second);
    }
  }
  for (proc_id p = 0; p < n; ++p)
    if (listed_on[p] == 0)
      return make_error(errc::parse_error, "processor " + std::to_string(p) +
                                             (p < names.size() ? " (" + names[p] + ")" : "") +
                                             " is not listed");
  return groups;
}

expected<std::vector<std::vector<int>>> load_clusters(const std::string& path, std::size_t n,
                                                      const std::vector<std::string>& names) {
  auto text = read_file(path);
  if (!text)
    return text.err();
  auto g = parse_clusters(*text, n, names);
  if (!g)
    return make_error(g.err().code, path + ": " + g.err().message);
  return g;
}

std::vector<int> clusters_by_threshold(const std::vector<std::vector<double>>& latency,
                                       double threshold_ms) {
  const auto n = latency.size();
  std::vector<std::size_t> up(n);
  for (std::size_t p = 0; p < n; ++p)
    up[p] = p;
  auto find = [&](std::size_t p) {
    while (up[p] != p)
      p = up[p] = up[up[p]];
    return p;
  };
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b)
      if (latency[a][b] < threshold_ms && latency[b][a] < threshold_ms) {
        // The lower representative wins, so each cluster is named by its lowest member.
        auto ra = find(a), rb = find(b);
        if (ra != rb)
          up[std::max(ra, rb)] = std::min(ra, rb);
      }
  std::vector<int> cluster(n, -1);
  std::map<std::size_t, int> number;
  for (std::size_t p = 0; p < n; ++p) {
    auto r = find(p);
    auto it = number.find(r);
    if (it == number.end())
      it = number.emplace(r, static_cast<int>(number.size())).first;
    cluster[p] = it->second;
  }
  return cluster;
}

} // namespace banyan

/* certa site index: filter and sort the runs table in place. No network, no library: works from file://. */
(function () {
  "use strict";
  var table = document.getElementById("runs-table");
  var filter = document.getElementById("filter");
  var shown = document.getElementById("shown");
  var none = document.getElementById("no-match");
  if (!table || !filter) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var numeric = { time: true, chain: true };

  function applyFilter() {
    var query = filter.value.trim().toLowerCase();
    var terms = query.split(/\s+/).filter(Boolean);
    /* a query that is exactly a spec name keeps that spec's runs only (not names it is a prefix of);
       otherwise a row is shown when every term occurs in its name, verdict, profile, run id, replay or approval */
    var exact = rows.some(function (row) { return row.getAttribute("data-name").toLowerCase() === query; });
    var visible = 0;
    rows.forEach(function (row) {
      var match = exact ? row.getAttribute("data-name").toLowerCase() === query
        : terms.every(function (term) { return row.getAttribute("data-search").toLowerCase().indexOf(term) !== -1; });
      row.hidden = !match;
      if (match) { visible += 1; }
    });
    shown.textContent = visible + " of " + rows.length + " runs";
    none.hidden = visible !== 0;
  }

  function sortBy(header, key) {
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var keyed = rows.map(function (row, index) {
      var value = row.getAttribute("data-" + key) || "";
      return { row: row, index: index, value: numeric[key] ? Number(value) : value.toLowerCase() };
    });
    keyed.sort(function (a, b) {
      var order = a.value < b.value ? -1 : (a.value > b.value ? 1 : 0);
      return (ascending ? order : -order) || a.index - b.index;
    });
    var fragment = document.createDocumentFragment();
    keyed.forEach(function (item) { fragment.appendChild(item.row); });
    body.appendChild(fragment);
  }

  filter.addEventListener("input", applyFilter);
  Array.prototype.forEach.call(table.querySelectorAll("th button[data-sort]"), function (button) {
    button.addEventListener("click", function () { sortBy(button.parentNode, button.getAttribute("data-sort")); });
  });
  if (filter.value) { applyFilter(); }
}());

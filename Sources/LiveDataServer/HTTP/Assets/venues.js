// The venue list at `/`: every dataset, venue, building and floor the daemon knows (from
// /v1/venues: floors with locations, and floors only the geometry draws yet), each floor
// with its summary and a link to its page. Read again every 10 s.
"use strict";

const main = document.getElementById("venues");

function element(name, attributes = {}, ...children) {
  const node = document.createElement(name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

// "3 locations: Occupied 1 Vacant 2 · 4 of 20 people"
function summaryText(floor) {
  if (!floor.locations) return [element("span", { class: "summary" }, "no reports yet")];
  const states = Object.keys(floor.states || {}).sort()
    .map((state) => element("span", { class: "state" }, `${state} ${floor.states[state]}`));
  const people = floor.capacity > 0 ? ` · ${floor.people} of ${floor.capacity} people` : ` · ${floor.people} people`;
  const summary = element("span", { class: "summary" }, `${floor.locations} locations: `);
  states.forEach((state, index) => summary.append(...(index ? [" ", state] : [state])));
  summary.append(people);
  return [summary];
}

function render(summaries) {
  const floors = summaries.filter((summary) => summary.floor !== undefined);
  main.replaceChildren();
  if (!floors.length) {
    main.append(element("p", { class: "empty" }, "No location has reported yet. Floors appear here as live updates arrive."));
    return;
  }
  const key = (floor) => [floor.dataset, floor.venue, floor.building, floor.floor];
  floors.sort((a, b) => (key(a).join("\u0000") < key(b).join("\u0000") ? -1 : 1));
  let dataset, building, list;
  for (const floor of floors) {
    if (floor.dataset !== dataset) {
      dataset = floor.dataset;
      building = undefined;
      main.append(element("h2", {}, `Dataset ${dataset}`));
    }
    const name = `${floor.venue}\u0000${floor.building}`;
    if (name !== building) {
      building = name;
      list = element("ul", { class: "floors" });
      main.append(element("section", { class: "building" }, element("h3", {}, `${floor.venue} · building ${floor.building}`), list));
    }
    const link = "/floors/" + key(floor).map(encodeURIComponent).join("/");
    list.append(element("li", {}, element("a", { href: link }, `Floor ${floor.floor}`), " ", ...summaryText(floor)));
  }
}

async function refresh() {
  try {
    const response = await fetch("/v1/venues", { cache: "no-store" });
    if (response.ok) render((await response.json()).summaries);
  } catch (error) {
    // The daemon restarts or the network drops: the list stays as it was until the next try.
  }
  document.body.dataset.ready = "true";
}

refresh();
setInterval(refresh, 10000);

// records/dates.js: due dates (`YYYY-MM-DD[THH:MM]`) and recurrence intervals (`6h`,
// `3d`, `2w`, `1m`, `1y`) as tasks store them, read and written in the person's local time.
//
// Owns: formatting a due date ("today", "Tue", "3 Dec"), telling overdue ones, saying
// an interval in words. Must never guess a time zone (a due date is a local calendar
// date, as the person typed it) nor move a recurring task's due date on (the API's
// `POST /tasks/{id}/done` does).

const UNITS = { h: ['hour', 'hours'], d: ['day', 'days'], w: ['week', 'weeks'], m: ['month', 'months'], y: ['year', 'years'] };

/** Today's local date as `YYYY-MM-DD`. */
export function today() {
  return iso(new Date());
}

function iso(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/** `{date: 'YYYY-MM-DD', time: 'HH:MM'|''}` of a stored due, or null. */
export function splitDue(due) {
  if (!due) return null;
  const [date, time = ''] = due.split('T');
  return { date, time: time.slice(0, 5) };
}

function parseDate(date) {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(y, m - 1, d);
}

/** Whether an open task due `due` is late (a date before today, or a time passed today). */
export function isOverdue(due) {
  const d = splitDue(due);
  if (!d) return false;
  const t = today();
  if (d.date !== t) return d.date < t;
  if (!d.time) return false;
  const now = new Date();
  const hm = `${String(now.getHours()).padStart(2, '0')}:${String(now.getMinutes()).padStart(2, '0')}`;
  return d.time < hm;
}

/** A due date in a few words: "today", "tomorrow 09:00", "yesterday", "Fri", "3 Dec 2027". */
export function formatDue(due) {
  const d = splitDue(due);
  if (!d) return '';
  const date = parseDate(d.date);
  const days = Math.round((date - parseDate(today())) / 86400000);
  let word;
  if (days === 0) word = 'today';
  else if (days === 1) word = 'tomorrow';
  else if (days === -1) word = 'yesterday';
  else if (days > 1 && days < 7) word = date.toLocaleDateString(undefined, { weekday: 'short' });
  else {
    const sameYear = date.getFullYear() === new Date().getFullYear();
    word = date.toLocaleDateString(undefined, {
      day: 'numeric',
      month: 'short',
      year: sameYear ? undefined : 'numeric',
    });
  }
  return d.time ? `${word} ${d.time}` : word;
}

/** `{count, unit}` of an interval (`3d` → {3, 'd'}), or null. */
export function parseInterval(s) {
  const m = /^(\d+)([hdwmy])$/.exec(s ?? '');
  return m ? { count: Number(m[1]), unit: m[2] } : null;
}

/** An interval in words: "every day", "every 3 weeks". */
export function intervalText(s) {
  const i = parseInterval(s);
  if (!i) return s ? `every ${s}` : '';
  const [one, many] = UNITS[i.unit];
  return i.count === 1 ? `every ${one}` : `every ${i.count} ${many}`;
}

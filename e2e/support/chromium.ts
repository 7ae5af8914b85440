/** Debian's chromium (apt-get install chromium): the only browser the suite drives. */
export const CHROMIUM = '/usr/bin/chromium';

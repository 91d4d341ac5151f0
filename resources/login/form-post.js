document.getElementById('f').submit();
